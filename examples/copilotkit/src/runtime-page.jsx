// Deployment 1: the page talks to CopilotKit's runtime (runtime.mjs), whose HttpAgent talks to
// aais_agui's /agent and forwards the page's Authorization header. The full provider.
import { createRoot } from "react-dom/client";
import { CopilotKitProvider, useAgent, useCopilotKit, useInterrupt } from "@copilotkit/react-core/v2";
import { ApprovalsPage } from "./approvals.jsx";
import { bearerToken } from "./token.js";

const hooks = { useAgent, useCopilotKit, useInterrupt };

createRoot(document.getElementById("root")).render(
  <CopilotKitProvider
    runtimeUrl="/api/copilotkit"
    headers={{ Authorization: `Bearer ${bearerToken()}` }}
    showDevConsole={false}
    enableInspector={false}
  >
    <ApprovalsPage mode="runtime" hooks={hooks} />
  </CopilotKitProvider>,
);
