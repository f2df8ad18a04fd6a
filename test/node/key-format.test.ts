import { readFileSync } from "node:fs";
import { crc32 } from "node:zlib";
import { describe, expect, it } from "vitest";
import { generateApiKey, isWellFormedApiKey } from "../../src/api-keys/format.ts";

/** docs/key-format.md is what scanners implement: its regular expression and its checksum code must agree with the keys we issue. */

const page = readFileSync(new URL("../../docs/key-format.md", import.meta.url), "utf8");
const regex = new RegExp(/```\n(\\bpda_.*)\n```/.exec(page)![1]!.replace(/^\\b|\\b$/g, ""));
const code = /```js\n([\s\S]*?)```/.exec(page)![1]!.replace(/^import .*$/m, "");
const isPriceDataApiKey = new Function("crc32", `${code}; return isPriceDataApiKey;`)(crc32) as (candidate: string) => boolean;

describe("docs/key-format.md", () => {
  it("recognises every key we issue, live and test, and only well-formed ones", () => {
    for (let i = 0; i < 500; i++) {
      const { key } = generateApiKey("pda", i % 2 ? "test" : "live");
      expect(key).toMatch(new RegExp(`^${regex.source}$`));
      expect(isPriceDataApiKey(key), key).toBe(true);
      // One character changed anywhere in the random part or the checksum: the page's check and the server's agree.
      const at = 9 + (i % 46);
      const changed = key.slice(0, at) + (key[at] === "a" ? "b" : "a") + key.slice(at + 1);
      expect(isPriceDataApiKey(changed)).toBe(isWellFormedApiKey(changed, "pda"));
      expect(isPriceDataApiKey(changed)).toBe(false);
    }
  });
});
