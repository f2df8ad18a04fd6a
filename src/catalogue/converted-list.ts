import { sha256Hex } from "../platform/hash.ts";
import { type Conversion, convertProductJson, ratesTag } from "./converted.ts";
import { type Checked, concatenated, type Deflated, deflatePart, FINAL_BLOCK, GZIP_HEADER, gzipTrailer } from "./snapshot/gzip-member.ts";
import { listParts, type Manifest, type Segment } from "./snapshot/manifest.ts";
import { extentLines, streamOf } from "./snapshot/read.ts";

/**
 * The whole catalogue converted (`GET /products?currency=` with no filter), from converted segments kept in R2
 * (docs/catalogue.md, "The converted list"). A segment's products converted into one currency at one day's rates are
 * a deflate piece of their own, like the snapshot's parts: the first response that needs one converts the segment and
 * keeps the piece (after its answer), and every later one, whoever asks, streams the stored bytes. A segment is named
 * by where its products are (a build that does not rewrite it keeps it), so a new snapshot keeps the pieces of every
 * segment it did not touch; new rates make new pieces. So a warm list costs about what the stored list does, and
 * the conversion's CPU is paid once a segment, currency and day (the builder pays it ahead: warmStep).
 */

/** Converted pieces read ahead of the one being streamed (a Worker has 6 connections at once). */
const PREFETCH = 4;
/** Where converted pieces are kept: by rates day, so a lifecycle rule on the prefix clears old days (docs/catalogue.md). */
export const CONVERTED_PREFIX = "catalogue/converted/";

/** Each segment's name among the pieces: a hash of where its products are, worked out once per segment an isolate reads. */
const segmentHashes = new WeakMap<Segment, string>();
async function segmentHash(segment: Segment): Promise<string> {
  let hash = segmentHashes.get(segment);
  if (hash === undefined) segmentHashes.set(segment, (hash = await sha256Hex(JSON.stringify(segment.ndjson.extents), 16)));
  return hash;
}

/**
 * Where a conversion's pieces of one form are kept (named by its rates), each segment's key among them, and where the
 * builder writes which pieces it has seen kept (`known`, once a warm pass is done), for responses to read.
 */
async function piecesOf(conversion: Conversion, form: "json" | "ndjson") {
  const rates = await ratesTag(conversion);
  const prefix = `${CONVERTED_PREFIX}${conversion.day?.date ?? "no-rates"}/${conversion.currency}-${rates}/${form}-`;
  return { rates, known: `${prefix}known.json`, keyOf: async (segment: Segment) => prefix + (await segmentHash(segment)) };
}

/** A segment's products converted, as one deflate piece of the form: its products joined as the form joins them. */
async function convertSegment(bucket: R2Bucket, segment: Segment, conversion: Conversion, form: "json" | "ndjson"): Promise<Deflated> {
  const converted: string[] = [];
  for await (const lines of extentLines(bucket, segment.ndjson.extents))
    for (const line of lines) converted.push(convertProductJson(line, conversion));
  return deflatePart(form === "json" ? converted.join(",") : converted.map((line) => `${line}\n`).join(""));
}

/** The segment's converted piece: kept in R2, or converted now and kept once the answer is sent (`keep`). */
async function convertedPiece(
  bucket: R2Bucket,
  { segment, key }: { segment: Segment; key: string },
  conversion: Conversion,
  form: "json" | "ndjson",
  keep: (put: Promise<unknown>) => void,
): Promise<Deflated> {
  const stored = await bucket.get(key);
  const meta = stored?.customMetadata;
  if (stored && meta?.crc !== undefined && meta.length !== undefined) {
    return { bytes: new Uint8Array(await stored.arrayBuffer()), crc: Number(meta.crc), length: Number(meta.length) };
  }
  const piece = await convertSegment(bucket, segment, conversion, form);
  keep(keepPiece(bucket, key, piece));
  return piece;
}

const keepPiece = (bucket: R2Bucket, key: string, piece: Deflated) =>
  bucket.put(key, piece.bytes, { customMetadata: { crc: String(piece.crc), length: String(piece.length) } });

/** What the catalogue builder knows of one currency and form kept warm: the rates, and the segments whose pieces are in R2. */
export interface WarmPieces {
  rates: string;
  segments: string[];
}

/**
 * Segments a response converts itself at most (about 2 s of CPU at ~30 ms a segment of 1,000 products): a list with
 * more of its pieces unknown to the builder is answered 503 while the builder converts them in steps of its own, so
 * no response spends the 30 s of CPU a million products' conversion takes (src/key-data/live.ts).
 */
export const INLINE_CONVERTED_SEGMENTS = 64;

/** The snapshot's segments with each one's piece key, and which of them `known` does not name (their pieces may be missing). */
async function piecesToFind({ rates, keyOf }: Awaited<ReturnType<typeof piecesOf>>, manifest: Manifest, known: WarmPieces | undefined) {
  const seen = new Set(known?.rates === rates ? known.segments : []);
  const segments = await Promise.all(manifest.segments.map(async (segment) => ({ segment, key: await keyOf(segment) })));
  return { segments, unknown: segments.filter(({ key }) => !seen.has(key)) };
}

/**
 * How many of the snapshot's converted pieces the builder has not seen kept (what its last finished warm pass wrote
 * to R2: one read): at most that many a response would convert itself.
 */
export async function unconvertedSegments(
  bucket: R2Bucket,
  manifest: Manifest,
  conversion: Conversion,
  form: "json" | "ndjson",
): Promise<number> {
  const pieces = await piecesOf(conversion, form);
  const stored = await bucket.get(pieces.known);
  const known = stored ? ((await stored.json()) as WarmPieces) : undefined;
  return (await piecesToFind(pieces, manifest, known)).unknown.length;
}

/**
 * One bounded step of keeping a currency's converted list warm (the catalogue builder's, after a build or new rates):
 * the pieces of at most `most` segments of the snapshot that R2 does not hold yet are converted and kept. `known`
 * names the segments seen kept before at these rates, so a new snapshot costs a look (an R2 head) at each segment it
 * rewrote, not at every one. Returns what is known now, and whether segments are left for another step.
 */
export async function warmStep(
  bucket: R2Bucket,
  manifest: Manifest,
  conversion: Conversion,
  form: "json" | "ndjson",
  known: WarmPieces | undefined,
  most: number,
): Promise<{ known: WarmPieces; more: boolean }> {
  const pieces = await piecesOf(conversion, form);
  const { rates } = pieces;
  const { segments, unknown } = await piecesToFind(pieces, manifest, known);
  const unseen = new Set(unknown.map(({ key }) => key));
  const kept: string[] = [];
  let converted = 0;
  for (const { segment, key } of segments) {
    if (unseen.has(key)) {
      if (converted === most) {
        const seen = known?.rates === rates ? known.segments : [];
        return { known: { rates, segments: [...new Set([...seen, ...kept])] }, more: true };
      }
      if (!(await bucket.head(key))) {
        await keepPiece(bucket, key, await convertSegment(bucket, segment, conversion, form));
        converted++;
      }
    }
    kept.push(key);
  }
  // Only the current snapshot's segments are remembered, so what is known stays the size of one snapshot. Responses
  // read it from R2, written when a pass that met segments it had not seen is done: at most once a build or new rates.
  const done = { rates, segments: kept };
  if (unknown.length > 0) await bucket.put(pieces.known, JSON.stringify(done));
  return { known: done, more: false };
}

/** The list as one gzip member: the stored brackets and commas (JSON), each segment's converted piece, the trailer. */
async function* convertedMember(
  bucket: R2Bucket,
  manifest: Manifest,
  conversion: Conversion,
  form: "json" | "ndjson",
  keep: (put: Promise<unknown>) => void,
): AsyncGenerator<Uint8Array> {
  yield GZIP_HEADER.slice();
  const { keyOf } = await piecesOf(conversion, form);
  const pieces: Promise<Deflated>[] = [];
  const piece = (i: number) => {
    while (pieces.length < Math.min(manifest.segments.length, i + PREFETCH)) {
      const segment = manifest.segments[pieces.length]!;
      const pending = keyOf(segment).then((key) => convertedPiece(bucket, { segment, key }, conversion, form, keep));
      pending.catch(() => undefined); // awaited in turn; one left behind by a cancelled response is no unhandled rejection
      pieces.push(pending);
    }
    return pieces[i]!;
  };
  const placeholders = manifest.segments.map((_, i) => ({ i, crc: 0, length: 0 }));
  // Only each piece's checksum is kept for the trailer: a piece's bytes go once streamed (a list is hundreds of MB).
  const checked: Checked[] = [];
  for (const part of listParts(placeholders, form)) {
    const { bytes, crc, length } = "i" in part ? await piece(part.i) : part;
    if ("i" in part) delete pieces[part.i];
    checked.push({ crc, length });
    yield bytes.slice();
  }
  yield FINAL_BLOCK.slice();
  yield gzipTrailer(concatenated(checked));
}

/** The whole catalogue converted, `{"products":[…]}` or NDJSON, gzip or not: byte for byte what a filtered read of every product gives. */
export function convertedCatalogue(
  bucket: R2Bucket,
  manifest: Manifest,
  { conversion, form, gzip }: { conversion: Conversion; form: "json" | "ndjson"; gzip: boolean },
  keep: (put: Promise<unknown>) => void,
): ReadableStream<Uint8Array> {
  const member = streamOf(convertedMember(bucket, manifest, conversion, form, keep));
  return gzip ? member : member.pipeThrough(new DecompressionStream("gzip"));
}
