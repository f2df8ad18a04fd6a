import { onForget } from "../../platform/isolate-memory.ts";
import { FINAL_BLOCK, GZIP_HEADER, gzipTrailer } from "./gzip-member.ts";
import { bodyExtents, type Extent, type Manifest, readManifest, readPointer } from "./manifest.ts";

/**
 * The read side of the snapshot: which manifest is current, and its segments as byte streams.
 *
 * Each isolate keeps the current manifest and re-reads the pointer (a few bytes from R2) at most
 * once per POINTER_TTL_MS, so every isolate serves a new snapshot within about a second of the
 * builder moving the pointer. A request never waits on another request's read (in workerd, code
 * resumed by another request's I/O runs in that request's context): while one request checks, the
 * others serve the manifest they have, and a request with none reads the pointer itself.
 */
const POINTER_TTL_MS = 1000;
/** R2 reads in flight ahead of the one being streamed (a Worker has 6 connections at once). */
const PREFETCH = 4;

let cached: { manifest: Manifest | null; checkedAt: number } | undefined;
let checkingSince = 0;
onForget(() => {
  forgetManifest();
  checkingSince = 0;
});

/** Forget the cached manifest: the next read checks the pointer (after this isolate had a snapshot built: servingManifest). */
export function forgetManifest(): void {
  cached = undefined;
}

/** The current manifest, or null before the first snapshot was built. */
export async function currentManifest(bucket: R2Bucket): Promise<Manifest | null> {
  const now = Date.now();
  if (cached && (now - cached.checkedAt < POINTER_TTL_MS || now - checkingSince < 2 * POINTER_TTL_MS)) return cached.manifest;
  checkingSince = now;
  try {
    const pointer = await readPointer(bucket);
    let manifest: Manifest | null = null;
    if (pointer) manifest = cached?.manifest?.id === pointer.manifest ? cached.manifest : await readManifest(bucket, pointer.manifest);
    // A check that finished late must not put back an older snapshot.
    if (!cached?.manifest || !manifest || manifest.version >= cached.manifest.version) cached = { manifest, checkedAt: Date.now() };
    return cached.manifest;
  } finally {
    checkingSince = 0;
  }
}

/** A piece of a response: bytes at hand, or a byte range of an R2 object. */
type Part = Uint8Array | Extent;

/** R2 reads of the parts' ranges, started up to PREFETCH ahead of the one asked for. */
function prefetching(bucket: R2Bucket, parts: readonly Part[]): (i: number) => Promise<R2ObjectBody> {
  const reads: (Promise<R2ObjectBody | null> | null)[] = [];
  const start = (i: number) => {
    const part = parts[i]!;
    if (part instanceof Uint8Array) return null;
    const pending = bucket.get(part.key, { range: { offset: part.offset, length: part.bytes } });
    pending.catch(() => undefined); // awaited in turn; one left behind by a cancelled response is no unhandled rejection
    return pending;
  };
  return async (i) => {
    while (reads.length < Math.min(parts.length, i + PREFETCH)) reads.push(start(reads.length));
    const part = parts[i] as Extent;
    const object = await reads[i]!;
    if (!object) throw new Error(`The snapshot object ${part.key} is missing from R2`);
    return object;
  };
}

/**
 * The parts one after another, piped natively: the R2 bytes never pass through JavaScript, so
 * serving the whole catalogue costs the isolate no heap, and a slow client holds back the reads.
 */
function concatenation(bucket: R2Bucket, parts: readonly Part[]): ReadableStream<Uint8Array> {
  const { readable, writable } = new IdentityTransformStream();
  const read = prefetching(bucket, parts);
  void (async () => {
    try {
      for (const [i, part] of parts.entries()) {
        if (part instanceof Uint8Array) {
          const writer = writable.getWriter();
          await writer.write(part.slice()); // a copy: the constant parts are shared by every response
          writer.releaseLock();
        } else {
          await (await read(i)).body.pipeTo(writable, { preventClose: true });
        }
      }
      await writable.close();
    } catch (error) {
      await writable.abort(error).catch(() => undefined); // the client went away, or an object was missing
    }
  })();
  return readable;
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

/**
 * The whole catalogue, `{"products":[…]}` or NDJSON: one gzip member made of the stored parts and
 * the trailer the build computed (src/catalogue/snapshot/gzip-member.ts), or that member decompressed.
 */
export function wholeCatalogue(bucket: R2Bucket, manifest: Manifest, form: "json" | "ndjson", gzip: boolean): ReadableStream<Uint8Array> {
  const parts = [GZIP_HEADER, ...bodyExtents(manifest.segments, form), FINAL_BLOCK, gzipTrailer(manifest.body[form])];
  const member = concatenation(bucket, parts);
  return gzip ? member : member.pipeThrough(new DecompressionStream("gzip"));
}

/** A product line's id: every product's JSON begins with it (productView's first field), so no parse is needed. */
const ID_PREFIX = '{"id":"';
export const idOf = (line: string) => line.slice(ID_PREFIX.length, line.indexOf('"', ID_PREFIX.length));

/** The products (one JSON text each, in id order) of NDJSON extents, one after another: their parts as one deflate stream. */
export async function* extentLines(bucket: R2Bucket, extents: readonly Extent[]): AsyncGenerator<string[]> {
  // A generator, so nothing is read before the first batch is asked for.
  yield* linesOf(concatenation(bucket, [...extents, FINAL_BLOCK]).pipeThrough(new DecompressionStream("deflate-raw")));
}

/** A text stream's lines, a batch at a time (the text ends with a newline). */
export async function* linesOf(stream: ReadableStream<Uint8Array>): AsyncGenerator<string[]> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  try {
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      const lines = (pending + decoder.decode(chunk.value, { stream: true })).split("\n");
      pending = lines.pop()!;
      if (lines.length > 0) yield lines;
    }
  } finally {
    await reader.cancel().catch(() => undefined); // a consumer that stopped early stops the reads
  }
}
