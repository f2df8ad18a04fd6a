/**
 * What an isolate keeps between requests: caches, memos, remembered refusals. Each is made or registered here, so
 * they are listed in one place and can be forgotten at once. Production never forgets (an isolate's memories go
 * with it); the tests run many files in one runtime (vitest.config.ts) and start each as a new isolate would.
 */
const forgetters: (() => void)[] = [];

/** A map this isolate keeps, emptied by `forgetIsolateMemory`. */
export function isolateMap<K, V>(): Map<K, V> {
  const map = new Map<K, V>();
  forgetters.push(() => map.clear());
  return map;
}

/** How to forget a memory that is not a map (a cached value, a flag). */
export function onForget(forget: () => void): void {
  forgetters.push(forget);
}

/** Everything this isolate remembers, as if it had just started. */
export function forgetIsolateMemory(): void {
  for (const forget of forgetters) forget();
}
