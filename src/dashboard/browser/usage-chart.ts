/**
 * One usage chart: admitted and refused requests per bucket as stacked bars, the plan's limit
 * as a line, a tooltip on hover or keyboard focus, and the exact numbers in a table underneath.
 *
 * Hand-drawn SVG rather than a chart library: what is needed here is two areas, a line and two axes,
 * which takes about 300 lines with the geometry, while the small chart libraries add 40 KB or more to a page that is
 * otherwise ~30 KB; and it is bundled with the page, never fetched from a CDN (the page's CSP allows
 * no other origin for scripts anyway). Colours come from styles.css classes; positions are SVG
 * attributes, so no inline style is needed.
 */
import { DAY_MS, HOUR_MS } from "../../platform/time.ts";
import type { Granularity, UsageBucket } from "./api-types.ts";
import { barSpan, bucketIndexAt, linearScale, tickStep, timeTicks, totals, valueAxis } from "./chart-geometry.ts";
import { el, formatDate, formatDateTime } from "./dom.ts";

const SVG = "http://www.w3.org/2000/svg";

interface Period {
  bucketMs: number;
  /** "minute", for the table and the busiest bucket. */
  per: string;
  /** "a minute", for the axis and the limit. */
  rate: string;
  /** How far the keyboard jumps with Page Up/Down. */
  page: number;
  tickLabel: Intl.DateTimeFormatOptions;
  /** A bucket's start as the tooltip and the table show it: the dashboard's one date format. */
  bucketLabel: (ms: number) => string;
  emptyRows: string;
}

const PERIODS: Record<Granularity, Period> = {
  minute: {
    bucketMs: 60_000,
    per: "minute",
    rate: "a minute",
    page: 60,
    tickLabel: { hour: "2-digit", minute: "2-digit" },
    bucketLabel: formatDateTime,
    emptyRows: "Minutes with no requests are left out.",
  },
  hour: {
    bucketMs: HOUR_MS,
    per: "hour",
    rate: "an hour",
    page: 24,
    tickLabel: { month: "short", day: "numeric" },
    bucketLabel: formatDateTime,
    emptyRows: "Hours with no requests are left out.",
  },
  day: {
    bucketMs: DAY_MS,
    per: "day",
    rate: "a day",
    page: 30,
    tickLabel: { month: "short", day: "numeric" },
    bucketLabel: formatDate,
    emptyRows: "Days with no requests are left out.",
  },
};

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes: Record<string, string | number>,
  text?: string,
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

const count = (n: number) => n.toLocaleString();
/** Axis labels stay short: 1,500 → 1.5k. */
const compact = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });

export interface ChartInput {
  /** Whether the table starts open (kept across a redraw). */
  tableOpen?: boolean;
  title: string;
  granularity: Granularity;
  buckets: UsageBucket[];
  /**
   * The plan's limit per bucket (per minute, hour or day) for one key; undefined over the account's total, which
   * no such limit caps (each key has its own), so no line is drawn there.
   */
  limit: number | undefined;
  width: number;
  /** Lines under the totals, e.g. why this range was picked. */
  notes?: string[];
}

export function usageChart({ title, granularity, buckets, limit, width, tableOpen = false, notes = [] }: ChartInput): HTMLElement {
  const period = PERIODS[granularity];
  const sum = totals(buckets);
  const figure = el("figure", { class: "chart" });
  const caption = el(
    "figcaption",
    {},
    el("h2", {}, title),
    el(
      "p",
      { class: "chart-totals" },
      el("span", { class: "swatch admitted" }),
      `${count(sum.admitted)} admitted`,
      el("span", { class: "swatch refused" }),
      `${count(sum.refused)} refused`,
      el("span", { class: "hint" }, `busiest ${period.per}: ${count(sum.peak)}`),
    ),
  );
  if (sum.uncertain > 0) caption.append(el("p", { class: "hint" }, uncertainNote(sum.uncertain)));
  for (const note of notes) caption.append(el("p", { class: "hint" }, note));
  figure.append(caption);
  if (!buckets.length) {
    figure.append(el("p", { class: "empty-state" }, "No usage recorded for this period."));
    return figure;
  }

  const height = width >= 640 ? 240 : 190;
  const margin = { top: 22, right: 12, bottom: 26, left: 44 };
  const first = new Date(buckets[0]!.start).getTime();
  const end = new Date(buckets.at(-1)!.start).getTime() + period.bucketMs;
  const axis = valueAxis(sum.peak, limit);
  const x = linearScale(first, end, margin.left, width - margin.right);
  const y = linearScale(0, axis.max, height - margin.bottom, margin.top);
  const unit = `requests ${period.rate}`;

  const chart = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "chart-svg", tabindex: 0, role: "img" });
  chart.setAttribute(
    "aria-label",
    `${title}: ${count(sum.admitted)} admitted, ${count(sum.refused)} refused. Use the arrow keys to read each ` +
      `${period.per}, or open the table below.`,
  );
  chart.append(svg("text", { x: 4, y: 12, class: "axis-title" }, unit));
  for (const tick of axis.ticks) {
    chart.append(
      svg("line", { x1: margin.left, x2: width - margin.right, y1: y(tick), y2: y(tick), class: "grid" }),
      svg("text", { x: margin.left - 6, y: y(tick) + 4, class: "tick", "text-anchor": "end" }, compact.format(tick)),
    );
  }
  const offset = -new Date().getTimezoneOffset() * 60_000;
  const tickFormat = new Intl.DateTimeFormat(undefined, period.tickLabel);
  for (const t of timeTicks(first, end, tickStep(end - first, width), offset)) {
    chart.append(
      svg("line", { x1: x(t), x2: x(t), y1: height - margin.bottom, y2: height - margin.bottom + 4, class: "axis" }),
      svg("text", { x: x(t), y: height - 8, class: "tick", "text-anchor": "middle" }, tickFormat.format(t)),
    );
  }
  const starts = buckets.map((b) => new Date(b.start).getTime());
  const upper = buckets.map((b) => b.admitted + b.refused);
  // A bar per bucket with requests, refused stacked on admitted; at least 2 units wide, so a lone busy
  // minute among 1,440 shows.
  const bars = svg("g", { class: "bars" });
  buckets.forEach((bucket, i) => {
    if (!upper[i]) return;
    const span = barSpan(starts[i]!, period.bucketMs, x, 2);
    const part = (from: number, to: number, kind: string) =>
      svg("rect", { ...span, y: y(to), height: Math.max(0, y(from) - y(to)), class: `bar ${kind}`, "data-index": i });
    if (bucket.admitted) bars.append(part(0, bucket.admitted, "admitted"));
    if (bucket.refused) bars.append(part(bucket.admitted, upper[i]!, "refused"));
  });
  chart.append(bars);
  chart.append(svg("line", { x1: margin.left, x2: width - margin.right, y1: y(0), y2: y(0), class: "axis" }));
  if (limit !== undefined) {
    const limitText = `limit ${count(limit)} ${period.rate}`;
    if (axis.limitShown) {
      // Its label goes in the legend above the chart, where it can never cover a bar.
      chart.append(svg("line", { x1: margin.left, x2: width - margin.right, y1: y(limit), y2: y(limit), class: "limit" }));
      caption
        .querySelector(".chart-totals")
        ?.append(el("span", { class: "swatch limit" }), el("span", { class: "limit-label" }, limitText));
    } else {
      caption.append(el("p", { class: "hint" }, `Your plan's ${limitText} is far above this scale.`));
    }
  }

  // The tooltip: a marker over the bucket under the pointer (or chosen with the keyboard) and its numbers.
  const marker = svg("rect", {
    x: 0,
    y: margin.top,
    width: 1,
    height: height - margin.top - margin.bottom,
    class: "marker",
    visibility: "hidden",
  });
  chart.append(marker);
  const tip = el("div", { class: "chart-tip", role: "status", hidden: true });
  let current = -1;
  const show = (index: number) => {
    current = index;
    const bucket = buckets[index]!;
    const left = x(starts[index]!);
    const right = x(starts[index]! + period.bucketMs);
    marker.setAttribute("x", String(left));
    marker.setAttribute("width", String(Math.max(1, right - left)));
    marker.setAttribute("visibility", "visible");
    tip.replaceChildren(
      el("strong", {}, period.bucketLabel(starts[index]!)),
      el("span", {}, el("span", { class: "swatch admitted" }), `${count(bucket.admitted)} admitted`),
      el("span", {}, el("span", { class: "swatch refused" }), `${count(bucket.refused)} refused`),
      ...(bucket.uncertain ? [el("span", {}, `${count(bucket.uncertain)} of them uncertain`)] : []),
    );
    tip.hidden = false;
    // Positioned through the CSSOM, which the page's CSP allows (a style attribute it would not), in CSS
    // pixels: the SVG is drawn scaled to its box, so its units are not pixels.
    const scale = chart.getBoundingClientRect().width / width || 1;
    const shown = chart.getBoundingClientRect().width || width;
    tip.style.left = `${Math.min(Math.max(((left + right) / 2) * scale, 70), shown - 70)}px`;
  };
  const hide = () => {
    marker.setAttribute("visibility", "hidden");
    tip.hidden = true;
  };
  // The pointer through the SVG's own screen transform, so it lands on the right bucket whatever size
  // the SVG is drawn at (CSS scales it to its box: the viewBox's units are not CSS pixels).
  const indexAt = (event: PointerEvent) => {
    const toSvg = chart.getScreenCTM()?.inverse();
    const svgX = toSvg ? new DOMPoint(event.clientX, event.clientY).matrixTransform(toSvg).x : event.offsetX;
    return bucketIndexAt(x.invert(svgX), first, period.bucketMs, buckets.length);
  };
  chart.addEventListener("pointermove", (event) => show(indexAt(event)));
  chart.addEventListener("pointerleave", () => (document.activeElement === chart ? show(current) : hide()));
  chart.addEventListener("focus", () => {
    const busiest = upper.lastIndexOf(Math.max(...upper));
    show(current >= 0 ? current : busiest);
  });
  chart.addEventListener("blur", hide);
  chart.addEventListener("keydown", (event) => {
    const moves: Record<string, number> = {
      ArrowLeft: -1,
      ArrowRight: 1,
      PageUp: -period.page,
      PageDown: period.page,
      Home: -Infinity,
      End: Infinity,
    };
    const move = moves[event.key];
    if (move === undefined) return;
    event.preventDefault();
    show(Math.min(buckets.length - 1, Math.max(0, (current < 0 ? buckets.length - 1 : current) + move)));
  });
  figure.append(el("div", { class: "chart-plot" }, chart, tip), usageTable(buckets, period, tableOpen));
  return figure;
}

/**
 * What `uncertain` means, where a range holds some: the key's limiter reserves admissions in blocks, and after a restart
 * counts a block's unused admissions as made (so no limit is ever exceeded), which may count requests never made.
 */
const uncertainNote = (n: number) =>
  `${count(n)} of the admitted may not have been made: the key's rate limiter restarted and counted the admissions it ` +
  "had reserved as used, so that no limit could be exceeded.";

/** The exact numbers, for reading rather than looking: the buckets that saw any request. */
function usageTable(buckets: UsageBucket[], period: Period, open: boolean): HTMLDetailsElement {
  // The column shows only where a restart left uncertain counts: otherwise it would be a column of zeros.
  const anyUncertain = buckets.some((b) => (b.uncertain ?? 0) > 0);
  const rows = buckets
    .filter((b) => b.admitted + b.refused > 0)
    .map((b) =>
      el(
        "tr",
        {},
        el("th", { scope: "row" }, period.bucketLabel(new Date(b.start).getTime())),
        el("td", {}, count(b.admitted)),
        el("td", {}, count(b.refused)),
        ...(anyUncertain ? [el("td", {}, count(b.uncertain ?? 0))] : []),
      ),
    );
  const summary = el("summary", {}, "Show the numbers as a table");
  if (!rows.length) return el("details", { class: "chart-table", open }, summary, el("p", {}, "No requests in this period."));
  const heading = `${period.per.charAt(0).toUpperCase()}${period.per.slice(1)} starting`;
  const table = el(
    "table",
    {},
    el("caption", {}, `Requests per ${period.per}, your local time. ${period.emptyRows}`),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el("th", { scope: "col" }, heading),
        el("th", { scope: "col" }, "Admitted"),
        el("th", { scope: "col" }, "Refused"),
        ...(anyUncertain ? [el("th", { scope: "col" }, "Of them uncertain")] : []),
      ),
    ),
    el("tbody", {}, ...rows),
  );
  // It scrolls on its own (up to 1,440 rows), so opening it does not make the page endless.
  return el(
    "details",
    { class: "chart-table", open },
    summary,
    el("div", { class: "table-scroll", tabindex: "0", role: "region", "aria-label": "Usage table" }, table),
  );
}
