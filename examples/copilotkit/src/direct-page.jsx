// Deployment 2: the page talks to aais_agui's /agent directly (same origin) with an AG-UI
// HttpAgent; no CopilotKit runtime. The headless core and hooks, without the chat UI.
import { HttpAgent } from "@ag-ui/client";
import { useMemo } from "react";
import { createRoot } from "react-dom/client";
import { CopilotKitContext, CopilotKitCoreReact, EMPTY_SET } from "@copilotkit/react-core/v2/context";
import { useAgent, useCopilotKit, useInterrupt } from "@copilotkit/react-core/v2/headless";
import { ApprovalsPage } from "./approvals.jsx";
import { bearerToken } from "./token.js";

const hooks = { useAgent, useCopilotKit, useInterrupt };
const AGENT_URL = new URL("../agent", document.baseURI).toString();

function HeadlessProvider({ children }) {
  const value = useMemo(() => {
    const agent = new HttpAgent({ url: AGENT_URL, headers: { Authorization: `Bearer ${bearerToken()}` } });
    const copilotkit = new CopilotKitCoreReact({ agents__unsafe_dev_only: { default: agent } });
    return { copilotkit, executingToolCallIds: EMPTY_SET };
  }, []);
  return <CopilotKitContext.Provider value={value}>{children}</CopilotKitContext.Provider>;
}

createRoot(document.getElementById("root")).render(
  <HeadlessProvider>
    <ApprovalsPage mode="direct" hooks={hooks} />
  </HeadlessProvider>,
);
