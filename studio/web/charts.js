// Line and bar charts over Chart.js 3.9.1, which the studio serves from Debian's libjs-chart.js
// at /static/chart.min.js. It is loaded on the first chart, not with the page, so the page shell
// stays small; colours come from style.css's custom properties (light and dark).
import { loadScript } from './dom.js';

export const chartLib = () => loadScript('/static/chart.min.js', 'Chart');

function css(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

export function palette() {
  return [1, 2, 3, 4, 5, 6].map((i) => css(`--series-${i}`));
}

function baseOptions(xTitle, yTitle, extra = {}) {
  const grid = css('--grid'), text = css('--muted');
  return {
    animation: false,
    responsive: true,
    maintainAspectRatio: false,
    parsing: false,
    normalized: true,
    interaction: { mode: 'nearest', axis: 'x', intersect: false },
    plugins: {
      legend: { display: false, labels: { color: text, boxWidth: 16, boxHeight: 2 } },
      tooltip: { enabled: true },
    },
    scales: {
      x: { type: 'linear', title: { display: Boolean(xTitle), text: xTitle, color: text },
           grid: { color: grid }, ticks: { color: text, maxTicksLimit: 6 } },
      y: { type: extra.logY ? 'logarithmic' : 'linear', title: { display: Boolean(yTitle), text: yTitle, color: text },
           grid: { color: grid }, ticks: { color: text, maxTicksLimit: 5 } },
    },
  };
}

// A chart of series over steps. series: [{label, dashed?}]; returns {set(i, points), chart}.
// Points are {x, y}; set() replaces a series' points and redraws (cheap at run sizes).
export class SeriesChart {
  constructor(canvas, { series, xTitle = 'step', yTitle = '', legend = false } = {}) {
    this.canvas = canvas;
    this.series = series;
    this.xTitle = xTitle;
    this.yTitle = yTitle;
    this.legend = legend;
    this.data = series.map(() => []);
    this.ready = chartLib().then((Chart) => this.#build(Chart));
  }

  #build(Chart) {
    const colours = palette();
    const opts = baseOptions(this.xTitle, this.yTitle);
    opts.plugins.legend.display = this.legend;
    this.chart = new Chart(this.canvas, {
      type: 'line',
      data: {
        datasets: this.series.map((s, i) => ({
          label: s.label,
          data: this.data[i],
          borderColor: s.colour || colours[i % colours.length],
          backgroundColor: s.colour || colours[i % colours.length],
          borderWidth: 1.75,
          borderDash: s.dashed ? [5, 4] : [],
          pointRadius: s.points ? 2.5 : 0,
          tension: s.points ? 0 : 0.15,  // a few evaluations: straight lines between them
          spanGaps: true,
        })),
      },
      options: opts,
    });
  }

  set(i, points) {
    this.data[i] = points;
    if (this.chart) {
      this.chart.data.datasets[i].data = points;
      this.#flatRange();
      this.chart.update('none');
    }
    this.canvas.dataset.points = String(this.data.reduce((n, d) => n + d.length, 0));
  }

  // Chart.js draws a constant series (a constant learning rate) on value ± 1, which flattens a
  // small value onto the axis: centre it instead.
  #flatRange() {
    const ys = this.data.flat().map((p) => p.y);
    const y = this.chart.options.scales.y;
    const lo = Math.min(...ys), hi = Math.max(...ys);
    if (ys.length && hi - lo <= Math.abs(hi) * 1e-9 && hi !== 0) {
      y.min = lo - Math.abs(hi) / 2;
      y.max = hi + Math.abs(hi) / 2;
    } else {
      delete y.min;
      delete y.max;
    }
  }

  // Replaces every series (the runs overlay, where the set of runs changes).
  async reset(series, data) {
    await this.ready;
    this.series = series;
    this.data = data;
    const colours = palette();
    this.chart.options.plugins.legend.display = this.legend;
    this.chart.data.datasets = series.map((s, i) => ({
      label: s.label, data: data[i], borderColor: colours[i % colours.length],
      backgroundColor: colours[i % colours.length], borderWidth: 1.75, pointRadius: 0, tension: 0.15,
      borderDash: s.dashed ? [5, 4] : [],
    }));
    this.chart.update('none');
    this.canvas.dataset.points = String(data.reduce((n, d) => n + d.length, 0));
  }

  destroy() {
    this.ready.then(() => this.chart && this.chart.destroy());
  }
}

// A histogram: bins [{lo, hi, count}] as bars.
export async function histogram(canvas, bins, label) {
  const Chart = await chartLib();
  const opts = baseOptions('tokens per example', 'examples');
  opts.scales.x = { type: 'category', grid: { display: false }, ticks: { color: css('--muted'), maxTicksLimit: 8 },
                    title: { display: true, text: 'tokens per example', color: css('--muted') } };
  opts.parsing = true;
  opts.normalized = false;
  const existing = Chart.getChart(canvas);
  if (existing) existing.destroy();
  return new Chart(canvas, {
    type: 'bar',
    data: {
      labels: bins.map((b) => b.label),
      datasets: [{ label, data: bins.map((b) => b.count), backgroundColor: bins.map((b) => (b.over ? css('--warn') : css('--series-1'))),
                   borderRadius: 3, barPercentage: 0.95, categoryPercentage: 0.95 }],
    },
    options: opts,
  });
}
