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

/**
 * A value this isolate keeps and loads again at most once per `ttlMs`. A request never waits on another request's load
 * (in workerd, code resumed by another request's I/O runs in that request's context): while one request loads, the
 * others serve what is kept (a load taking over 2 × ttlMs is presumed lost), and a request with nothing kept loads it
 * itself. `keep` stores a value this isolate wrote, and a load that started before it does not put back an older one.
 */
export function isolateRefreshed<T>(ttlMs: number): { get(load: () => Promise<T>): Promise<T>; keep(value: T): void } {
  let kept: { value: T; at: number } | undefined;
  let loadingSince = 0;
  let writes = 0;
  onForget(() => {
    kept = undefined;
    loadingSince = 0;
    writes++;
  });
  return {
    async get(load) {
      const now = Date.now();
      if (kept && (now - kept.at < ttlMs || now - loadingSince < 2 * ttlMs)) return kept.value;
      loadingSince = now;
      const writesBefore = writes;
      try {
        const value = await load();
        if (writes === writesBefore) kept = { value, at: Date.now() };
        return kept?.value ?? value;
      } finally {
        loadingSince = 0;
      }
    },
    keep(value) {
      writes++;
      kept = { value, at: Date.now() };
    },
  };
}
