// The bearer token the page sends: from the URL fragment (#token=...), which browsers never
// send to a server, kept for the tab. A real app gets it from its own sign-in.
export function bearerToken() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromHash) sessionStorage.setItem("aais-token", fromHash);
  return sessionStorage.getItem("aais-token") || "";
}
