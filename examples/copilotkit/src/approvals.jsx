// The page both deployments share: a prompt box, the conversation, and one card per open AAIS
// approval, answered through CopilotKit's useInterrupt. The answer is built by aais-client.js
// (the module aais_agui serves at /aais-client.js), so the page never hand-builds an envelope.
// The hooks come in as props: each deployment passes the ones of the provider it uses.

import { useEffect, useState } from "react";
import { decide } from "../../../aais_agui/static/aais-client.js";

// What the page believes about its user. The server records the actor its bearer token names.
const PAGE_ACTOR = { id: "copilotkit-page", type: "human" };

function secondsLeft(expiresAt, now) {
  return Math.max(0, Math.floor((Date.parse(expiresAt) - now) / 1000));
}

function Expiry({ expiresAt }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  if (!expiresAt) return <span className="expiry">No expiry</span>;
  const left = secondsLeft(expiresAt, now);
  return (
    <span className="expiry" data-expires-at={expiresAt}>
      {left === 0 ? "Expired" : `Expires in ${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`}
      {" "}
      <time dateTime={expiresAt}>({expiresAt})</time>
    </span>
  );
}

function ApprovalCard({ interrupt, answered, onChoice, onCancel }) {
  const request = interrupt.metadata?.aais?.request;
  if (!request) {
    return (
      <article className="card" data-interrupt-id={interrupt.id}>
        <h3>{interrupt.message || interrupt.reason}</h3>
        <p>Not an AAIS approval.</p>
      </article>
    );
  }
  const { action, risk } = request;
  return (
    <article className="card" data-interrupt-id={interrupt.id} data-request-id={request.id}>
      <header>
        <h3 className="summary">{action.summary}</h3>
        <span className="risk" data-level={risk.level}>{risk.level} risk</span>
      </header>
      <p className="action">
        <code>{action.kind}</code> · <code className="name">{action.name}</code>
      </p>
      <h4>Arguments</h4>
      <pre className="arguments">{JSON.stringify(action.arguments, null, 2)}</pre>
      <h4>Why it needs approval</h4>
      <ul className="reasons">
        {risk.reasons.map((reason, index) => (
          <li key={index}>{reason}</li>
        ))}
      </ul>
      <Expiry expiresAt={interrupt.expiresAt || request.expires_at} />
      <div className="choices">
        {request.choices.map((choice) => (
          <button
            key={`${choice.decision}/${choice.scope}`}
            type="button"
            data-decision={choice.decision}
            data-scope={choice.scope}
            disabled={answered !== undefined}
            onClick={() => onChoice(interrupt, choice)}
          >
            {choice.label}
          </button>
        ))}
        <button type="button" className="cancel" disabled={answered !== undefined} onClick={() => onCancel(interrupt)}>
          Cancel
        </button>
      </div>
      <p className="status" role="status">{answered ? `Answered: ${answered}` : ""}</p>
      <footer>
        Request <code>{request.id}</code> · digest <code className="digest">{request.action_digest}</code>
      </footer>
    </article>
  );
}

function Interrupts({ interrupts, resolve, cancel }) {
  // useInterrupt submits one resume once every open interrupt is answered; until then each
  // answered card says so.
  // A new offer (even of the same interrupts, after a refused answer) starts unanswered.
  const [answered, setAnswered] = useState({});
  useEffect(() => setAnswered({}), [interrupts]);
  const onChoice = (interrupt, choice) => {
    const envelope = decide(interrupt, choice, { actor: PAGE_ACTOR });
    setAnswered((seen) => ({ ...seen, [interrupt.id]: choice.label }));
    // The payload is the approval.decided envelope itself, as the interrupt's responseSchema
    // describes ({aais: envelope} works as well).
    resolve(envelope, interrupt.id)?.catch?.(() => {});
  };
  const onCancel = (interrupt) => {
    setAnswered((seen) => ({ ...seen, [interrupt.id]: "cancelled" }));
    cancel(interrupt.id)?.catch?.(() => {});
  };
  return (
    <section className="approvals" data-open={interrupts.length}>
      <h2>Waiting for your approval ({interrupts.length})</h2>
      {interrupts.map((interrupt) => (
        <ApprovalCard
          key={interrupt.id}
          interrupt={interrupt}
          answered={answered[interrupt.id]}
          onChoice={onChoice}
          onCancel={onCancel}
        />
      ))}
    </section>
  );
}

function text(message) {
  if (typeof message.content === "string") return message.content;
  return "";
}

export function ApprovalsPage({ mode, hooks }) {
  const { useAgent, useCopilotKit, useInterrupt } = hooks;
  const { copilotkit } = useCopilotKit();
  const { agent } = useAgent({ agentId: "default" });
  const [prompt, setPrompt] = useState("");
  const [running, setRunning] = useState(false);
  const [error, setError] = useState("");
  const element = useInterrupt({
    agentId: "default",
    renderInChat: false,
    render: ({ interrupts, resolve, cancel }) => (
      <Interrupts interrupts={interrupts} resolve={resolve} cancel={cancel} />
    ),
  });
  useEffect(() => {
    const subscription = agent.subscribe({
      onRunStartedEvent: () => setRunning(true),
      onRunErrorEvent: ({ event }) => setError(`${event.code || "error"}: ${event.message}`),
      onRunFinalized: () => setRunning(false),
      onRunFailed: ({ error: failure }) => {
        setRunning(false);
        setError(String(failure?.message || failure));
      },
    });
    return () => subscription.unsubscribe();
  }, [agent]);

  const send = async (event) => {
    event.preventDefault();
    const content = prompt.trim();
    if (!content) return;
    setPrompt("");
    setError("");
    agent.addMessage({ id: crypto.randomUUID(), role: "user", content });
    try {
      await copilotkit.runAgent({ agent });
    } catch (failure) {
      setError(String(failure?.message || failure));
    }
  };

  return (
    <main data-mode={mode} data-running={String(running)}>
      <h1>AAIS approvals with CopilotKit ({mode})</h1>
      <form onSubmit={send}>
        <input
          id="prompt"
          value={prompt}
          onChange={(event) => setPrompt(event.target.value)}
          placeholder="delete /srv/report.txt, or email ann@example.com,bob@example.com"
        />
        <button id="send" type="submit" disabled={running}>Send</button>
      </form>
      {error ? <p className="error" role="alert">{error}</p> : null}
      <ol className="transcript">
        {agent.messages
          .filter((message) => text(message))
          .map((message) => (
            <li key={message.id} data-role={message.role}>
              {text(message)}
            </li>
          ))}
      </ol>
      {element}
    </main>
  );
}
