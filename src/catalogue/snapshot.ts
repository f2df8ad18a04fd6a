import { manifestKey, Manifest, Pointer, POINTER_KEY, type Segment } from "./manifest.ts";

/**
 * The read side of the snapshot: which manifest is current, and its segments as byte streams.
 *
 * Each isolate keeps the current manifest and re-reads the pointer (a few bytes from R2) at most
 * once per POINTER_TTL_MS, so every isolate serves a new snapshot within about a second of the
 * builder moving the pointer. A request never waits on another request's read (in workerd, code
 * resumed by another request's I/O runs in that request's context): while one request checks, the
 * others serve the manifest they have, and a request with none reads the pointer itself.
 */
export const POINTER_TTL_MS = 1000;
/** R2 reads in flight ahead of the one being streamed (a Worker has 6 connections at once). */
const PREFETCH = 4;

let cached: { manifest: Manifest | null; checkedAt: number } | undefined;
let checkingSince = 0;

/** Forget the cached manifest: the next read checks the pointer (the tests, after a build). */
export function forgetManifest(): void {
  cached = undefined;
}

/** The current manifest, or null before the first snapshot was built. */
export async function currentManifest(bucket: R2Bucket): Promise<Manifest | null> {
  const now = Date.now();
  if (cached && (now - cached.checkedAt < POINTER_TTL_MS || now - checkingSince < 2 * POINTER_TTL_MS)) return cached.manifest;
  checkingSince = now;
  try {
    const pointerObject = await bucket.get(POINTER_KEY);
    let manifest: Manifest | null = null;
    if (pointerObject) {
      const pointer = Pointer.parse(await pointerObject.json());
      manifest = cached?.manifest?.id === pointer.manifest ? cached.manifest : await fetchManifest(bucket, pointer.manifest);
    }
    // A check that finished late must not put back an older snapshot.
    if (!cached?.manifest || !manifest || manifest.version >= cached.manifest.version) cached = { manifest, checkedAt: Date.now() };
    return cached.manifest;
  } finally {
    checkingSince = 0;
  }
}

async function fetchManifest(bucket: R2Bucket, id: string): Promise<Manifest> {
  const object = await bucket.get(manifestKey(id));
  if (!object) throw new Error(`The catalogue manifest ${id} is missing from R2`);
  return Manifest.parse(await object.json());
}

const fromBase64 = (text: string) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
const encoder = new TextEncoder();

/** A piece of a response: bytes as they are, or an R2 object's bytes (gzip-decoded on the way when `decode`). */
type Part = Uint8Array | { key: string };

/** R2 reads of the parts' objects, started up to PREFETCH ahead of the one asked for. */
function prefetching(bucket: R2Bucket, parts: readonly Part[]): (i: number) => Promise<R2ObjectBody | null> {
  const reads: (Promise<R2ObjectBody | null> | null)[] = [];
  const start = (i: number) => {
    const part = parts[i]!;
    if (part instanceof Uint8Array) return null;
    const pending = bucket.get(part.key);
    pending.catch(() => undefined); // awaited in turn; one left behind by a cancelled response is no unhandled rejection
    return pending;
  };
  return async (i) => {
    while (reads.length < Math.min(parts.length, i + PREFETCH)) reads.push(start(reads.length));
    const part = parts[i] as { key: string };
    const object = await reads[i]!;
    if (!object) throw new Error(`The snapshot object ${part.key} is missing from R2`);
    return object;
  };
}

const bodyOf = (object: R2ObjectBody, decode: boolean) => (decode ? object.body.pipeThrough(new DecompressionStream("gzip")) : object.body);

/** The parts' bytes as chunks in JavaScript (for filtering). */
async function* partChunks(bucket: R2Bucket, parts: readonly Part[], decode: boolean): AsyncGenerator<Uint8Array> {
  const read = prefetching(bucket, parts);
  for (const [i, part] of parts.entries()) {
    if (part instanceof Uint8Array) {
      yield part;
      continue;
    }
    const reader = bodyOf((await read(i))!, decode).getReader();
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) yield chunk.value;
  }
}

/**
 * The parts piped one after another into `writable`, natively: the R2 bytes (and the decompressed
 * ones) never pass through JavaScript, so serving the whole catalogue costs the isolate no heap.
 */
async function pipeParts(bucket: R2Bucket, parts: readonly Part[], decode: boolean, writable: WritableStream<Uint8Array>): Promise<void> {
  const read = prefetching(bucket, parts);
  try {
    for (const [i, part] of parts.entries()) {
      if (part instanceof Uint8Array) {
        const writer = writable.getWriter();
        await writer.write(part);
        writer.releaseLock();
      } else {
        await bodyOf((await read(i))!, decode).pipeTo(writable, { preventClose: true });
      }
    }
    await writable.close();
  } catch (error) {
    await writable.abort(error).catch(() => undefined); // the client went away, or an object was missing
  }
}

/** A byte stream pulled from an async generator, so nothing is read before the client takes it. */
export function streamOf(chunks: AsyncGenerator<Uint8Array>): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await chunks.next();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    async cancel() {
      await chunks.return(undefined);
    },
  });
}

/** The whole catalogue: `{"products":[…]}` (gzip as stored, or decoded) or NDJSON, segment after segment. */
export function wholeCatalogue(bucket: R2Bucket, manifest: Manifest, form: "json" | "ndjson", gzip: boolean): ReadableStream<Uint8Array> {
  const segments = manifest.segments.map((segment) => ({ key: segment[form].key }));
  let parts: Part[] = segments;
  if (form === "json") {
    const plain = { open: encoder.encode('{"products":['), comma: encoder.encode(","), close: encoder.encode("]}") };
    const gz = { open: fromBase64(manifest.gzipParts.open), comma: fromBase64(manifest.gzipParts.comma), close: fromBase64(manifest.gzipParts.close) };
    const glue = gzip ? gz : plain;
    parts = [glue.open, ...segments.flatMap((segment, i) => (i === 0 ? [segment] : [glue.comma, segment])), glue.close];
  }
  const { readable, writable } = new IdentityTransformStream();
  void pipeParts(bucket, parts, !gzip, writable);
  return readable;
}

/** The products (one JSON text each, in id order) of the given segments, decoded one segment at a time. */
export async function* productLines(bucket: R2Bucket, segments: readonly Segment[]): AsyncGenerator<string[]> {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of partChunks(bucket, segments.map((segment) => ({ key: segment.ndjson.key })), true)) {
    const lines = (pending + decoder.decode(chunk, { stream: true })).split("\n");
    pending = lines.pop()!;
    if (lines.length > 0) yield lines;
  }
}
