// The seeds' agent library (@mariozechner/pi-ai), unchanged, against a served primenb model:
// `complete` and `stream` with a tool, the tool's result sent back, a final answer.
// Usage: node agent.mjs BASE_URL MODEL_ID; prints one JSON line of what happened.
import { Type, complete, stream } from "@mariozechner/pi-ai";

const [baseUrl, modelId] = process.argv.slice(2);
const model = {
  id: modelId,
  name: modelId,
  api: "openai-completions",
  provider: "primenb",
  baseUrl,
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 2048,
  maxTokens: 120,
};
const weather = {
  name: "get_weather",
  description: "Weather in a city",
  parameters: Type.Object({ city: Type.String() }),
};
const options = { apiKey: "unused", temperature: 0, maxTokens: 120 };

function calls(message) {
  return message.content.filter((block) => block.type === "toolCall");
}

function text(message) {
  return message.content.filter((block) => block.type === "text").map((block) => block.text).join("");
}

async function agentTurns(context, run) {
  const first = await run(context);
  context.messages.push(first);
  const made = calls(first);
  for (const call of made) {
    context.messages.push({
      role: "toolResult",
      toolCallId: call.id,
      toolName: call.name,
      content: [{ type: "text", text: "sunny, 21 C" }],
      isError: false,
      timestamp: Date.now(),
    });
  }
  const final = made.length ? await run(context) : null;
  return {
    stopReason: first.stopReason,
    error: first.errorMessage ?? null,
    calls: made.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })),
    finalStopReason: final ? final.stopReason : null,
    finalError: final ? final.errorMessage ?? null : null,
    finalText: final ? text(final) : null,
  };
}

const question = () => ({
  messages: [{ role: "user", content: "What is the weather in Paris?", timestamp: Date.now() }],
  tools: [weather],
});

const completed = await agentTurns(question(), (context) => complete(model, context, options));
const events = [];
const streamed = await agentTurns(question(), async (context) => {
  const s = stream(model, context, options);
  for await (const event of s) events.push(event.type);
  return await s.result();
});
console.log(JSON.stringify({ complete: completed, stream: streamed, events: [...new Set(events)] }));
