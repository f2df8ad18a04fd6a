import { expect, vi } from "vitest";
import { call } from "./http.ts";

/** A stream's frames as they arrive (split on the blank line), its text so far, and the ids of the events it sent. */
export function readFrames(res: Response) {
  expect(res.status).toBe(200);
  const frames: string[] = [];
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const ended = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      const parts = buffer.split("\n\n");
      buffer = parts.pop()!;
      frames.push(...parts);
    }
  })();
  ended.catch(() => undefined); // a stream the test cancels
  /** Everything received so far, the frame under way included. */
  const text = () => [...frames, buffer].join("\n\n");
  return {
    frames,
    ended,
    text,
    /** Waits until the text received so far contains `needle`. */
    until: (needle: string) => vi.waitFor(() => expect(text()).toContain(needle), { timeout: 20_000, interval: 100 }),
    /** The ids of the events sent (frames with data). */
    sentIds: () => frames.filter((frame) => frame.includes("\ndata: ")).map((frame) => /^id: (.+)$/m.exec(frame)![1]!),
    close: async () => {
      await reader.cancel().catch(() => undefined);
      await ended.catch(() => undefined);
    },
  };
}

export const openStream = (key: string, query = "", headers: Record<string, string> = {}) =>
  call("GET", `/events/stream${query}`, { token: key, headers: { Accept: "text/event-stream", ...headers } });
