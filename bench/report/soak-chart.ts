/**
 * The soak's chart: three panels over one time axis (req/s; isolate heap and workerd RSS; p99),
 * drawn as SVG here and rasterised to PNG by Debian's Chromium through playwright-core.
 */
import { chromium } from "playwright-core";

interface Line {
  label: string;
  colour: string;
  points: { s: number; y: number }[];
}

export interface Panel {
  title: string;
  unit: string;
  lines: Line[];
}

const WIDTH = 1000;
const PANEL_HEIGHT = 220;
const MARGIN = { left: 70, right: 20, top: 34, bottom: 30 };

const escapeXml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** A round step for about `count` ticks over `span`. */
function tickStep(span: number, count: number): number {
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= raw) ?? raw;
}

function panelSvg(panel: Panel, top: number, seconds: number): string {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = PANEL_HEIGHT - MARGIN.top - MARGIN.bottom;
  const ys = panel.lines.flatMap((l) => l.points.map((p) => p.y)).filter(Number.isFinite);
  const yMax = Math.max(1, ...ys) * 1.1;
  const x = (s: number) => MARGIN.left + (s / Math.max(1, seconds)) * plotW;
  const y = (v: number) => top + MARGIN.top + plotH - (v / yMax) * plotH;
  const parts: string[] = [];
  parts.push(`<text x="${MARGIN.left}" y="${top + 20}" font-size="15" font-weight="bold">${escapeXml(panel.title)}</text>`);
  const yStep = tickStep(yMax, 4);
  for (let v = 0; v <= yMax; v += yStep) {
    parts.push(`<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(v)}" y2="${y(v)}" stroke="#e4e4e4"/>`);
    parts.push(`<text x="${MARGIN.left - 6}" y="${y(v) + 4}" font-size="11" text-anchor="end">${+v.toPrecision(4)}</text>`);
  }
  const xStep = tickStep(seconds, 8);
  for (let s = 0; s <= seconds; s += xStep) {
    parts.push(`<text x="${x(s)}" y="${top + PANEL_HEIGHT - 10}" font-size="11" text-anchor="middle">${s} s</text>`);
  }
  parts.push(
    `<text x="16" y="${top + MARGIN.top + plotH / 2}" font-size="12" transform="rotate(-90 16 ${top + MARGIN.top + plotH / 2})" text-anchor="middle">${escapeXml(panel.unit)}</text>`,
  );
  parts.push(`<rect x="${MARGIN.left}" y="${top + MARGIN.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#999"/>`);
  let legendX = WIDTH - MARGIN.right;
  for (const line of [...panel.lines].reverse()) {
    const text = escapeXml(line.label);
    legendX -= text.length * 7 + 30;
    parts.push(`<line x1="${legendX}" x2="${legendX + 18}" y1="${top + 16}" y2="${top + 16}" stroke="${line.colour}" stroke-width="3"/>`);
    parts.push(`<text x="${legendX + 22}" y="${top + 20}" font-size="12">${text}</text>`);
  }
  for (const line of panel.lines) {
    const d = line.points
      .filter((p) => Number.isFinite(p.y))
      .map((p, i) => `${i === 0 ? "M" : "L"}${x(p.s).toFixed(1)},${y(p.y).toFixed(1)}`)
      .join("");
    if (d) parts.push(`<path d="${d}" fill="none" stroke="${line.colour}" stroke-width="1.8"/>`);
  }
  return parts.join("\n");
}

export function chartSvg(title: string, panels: Panel[], seconds: number): string {
  const height = 40 + panels.length * PANEL_HEIGHT;
  const body = panels.map((panel, i) => panelSvg(panel, 40 + i * PANEL_HEIGHT, seconds)).join("\n");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="${WIDTH / 2}" y="26" font-size="17" font-weight="bold" text-anchor="middle">${escapeXml(title)}</text>
${body}
</svg>`;
}

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Renders an SVG to a PNG file with headless Chromium. */
export async function writePng(svg: string, file: string): Promise<void> {
  const size = /width="(\d+)" height="(\d+)"/.exec(svg);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  try {
    const page = await browser.newPage({ viewport: { width: Number(size?.[1] ?? 1000), height: Number(size?.[2] ?? 700) } });
    await page.setContent(`<!doctype html><html><body style="margin:0">${svg}</body></html>`);
    await page.screenshot({ path: file, fullPage: true });
  } finally {
    await browser.close();
  }
}
