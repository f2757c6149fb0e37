// Sparklines of the hub's activity, drawn by the page as SVG.

const svgNS = "http://www.w3.org/2000/svg";

// sparkline draws values (null for a missing sample) on a fixed number of
// slots, the latest at the right, scaled to their peak.
export function sparkline(values, slots, label) {
  const w = 300, h = 40;
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const base = document.createElementNS(svgNS, "line");
  for (const [k, v] of Object.entries({ x1: 0, x2: w, y1: h - 1, y2: h - 1 })) base.setAttribute(k, v);
  svg.append(base);
  const peak = Math.max(0, ...values.filter((v) => v !== null));
  const step = w / Math.max(1, slots - 1);
  const offset = slots - values.length;
  let points = [];
  const flush = () => {
    if (points.length) {
      const line = document.createElementNS(svgNS, "polyline");
      line.setAttribute("points", points.join(" "));
      svg.append(line);
    }
    points = [];
  };
  values.forEach((v, i) => {
    if (v === null) { flush(); return; }
    const x = (offset + i) * step;
    const y = h - 1 - (peak > 0 ? (v / peak) * (h - 3) : 0);
    points.push(`${x.toFixed(1)},${y.toFixed(1)}`);
  });
  flush();
  return svg;
}
