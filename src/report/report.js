// report.js: draws the report's charts with Chart.js from the series in #gt-data
// (report/series.h), and records into #gt-selfcheck what it drew and any error, so a test
// (or a person) can check the page: {charts: [{id, points, painted}], skipped: [...], errors}.
(function () {
  'use strict';
  const check = { charts: [], skipped: [], errors: [] };
  const publish = () => {
    document.getElementById('gt-selfcheck').textContent = JSON.stringify(check);
  };
  // the notice that the charts were not drawn stays, with the error, when anything fails
  const failed = (msg) => {
    const span = document.getElementById('gt-script-error');
    if (span) span.textContent = ': ' + msg;
  };
  window.addEventListener('error', (e) => {
    check.errors.push(String(e.message) + ' (line ' + e.lineno + ')');
    failed(String(e.message));
    publish();
  });
  const consoleError = console.error;
  console.error = function (...args) {
    check.errors.push(args.map(String).join(' '));
    publish();
    consoleError.apply(console, args);
  };

  const D = JSON.parse(document.getElementById('gt-data').textContent);
  const runs = D.runs || [];
  const colors = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
                  '#7f7f7f', '#bcbd22', '#17becf'];
  const domainColors = { cpu: '#e6550d', ram: '#3182bd', gpu: '#31a354', psys: '#756bb1',
                         total: '#636363' };
  const est = (r) => (r.estimated ? ' (ESTIMATED energy)' : '');
  const anyEst = runs.some((r) => r.estimated);
  const grid = document.getElementById('gt-charts');

  // Counts the canvas pixels that are not transparent: a drawn chart has many.
  function painted(canvas) {
    const ctx = canvas.getContext('2d');
    const img = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    let n = 0;
    for (let i = 3; i < img.length; i += 4) if (img[i] !== 0) n++;
    return n;
  }

  // One chart in its own box; a chart without any data point says why instead of drawing.
  function chart(id, title, type, datasets, xTitle, yTitle, extra) {
    const points = datasets.reduce((n, d) => n + d.data.filter((p) => p !== null &&
      (typeof p !== 'object' || (p.y !== null && p.y !== undefined))).length, 0);
    // a run without this kind of data (e.g. unknown energy) is left out of the legend too
    datasets = datasets.filter((d) => d.data.some((p) => p !== null && p !== undefined));
    const box = document.createElement('div');
    box.className = 'chart';
    grid.appendChild(box);
    if (points === 0) {
      box.className = 'nochart';
      box.id = id;
      const noLines = runs.every((r) => r.lines === 0);
      box.textContent = title + ': no data (' + (noLines
        ? 'no readable metrics.jsonl line: see "Missing or damaged" above'
        : (extra && extra.why ? extra.why : 'nothing of this kind in metrics.jsonl')) + ')';
      check.skipped.push({ id, title });
      return;
    }
    const canvas = document.createElement('canvas');
    canvas.id = id;
    box.appendChild(canvas);
    if (typeof Chart === 'undefined') {
      check.skipped.push({ id, title, why: 'Chart.js not inlined' });
      return;
    }
    const scales = (extra && extra.scales) || {
      x: { type: type === 'bar' ? 'category' : 'linear', title: { display: true, text: xTitle } },
      y: { beginAtZero: !!(extra && extra.zero), title: { display: true, text: yTitle } },
    };
    const c = new Chart(canvas, {
      type,
      data: { labels: extra && extra.labels, datasets },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        parsing: type === 'bar' ? undefined : false,
        spanGaps: true,
        plugins: { title: { display: true, text: title }, legend: { position: 'bottom' } },
        scales,
      },
    });
    c.draw();
    check.charts.push({ id, title, points, painted: painted(canvas),
                        series: datasets.map((d) => ({ label: d.label, color: d.borderColor })) });
  }

  const xy = (arr, xKey, yKey) => arr.filter((p) => p[xKey] !== null && p[xKey] !== undefined &&
    p[yKey] !== null && p[yKey] !== undefined).map((p) => ({ x: p[xKey], y: p[yKey] }));

  // Loss against tokens, seconds and joules: training loss thin in a light colour, validation
  // loss with points in the dark colour of the same pair (Category20's pairs), so the two read
  // apart and each run keeps its hue.
  const pairs = [['#aec7e8', '#1f77b4'], ['#ff9896', '#d62728'], ['#98df8a', '#2ca02c'],
                 ['#ffbb78', '#ff7f0e'], ['#c5b0d5', '#9467bd'], ['#c49c94', '#8c564b'],
                 ['#f7b6d2', '#e377c2'], ['#c7c7c7', '#7f7f7f']];
  const axes = [['tokens', 'tokens trained'], ['s', 'training seconds (sum of step times)'],
                ['j', 'joules (logged training intervals)']];
  axes.forEach(([key, label], i) => {
    const ds = [];
    runs.forEach((r, k) => {
      const [trainColor, color] = pairs[k % pairs.length];
      const suffix = key === 'j' ? est(r) : '';
      ds.push({ label: r.name + ' train' + suffix, data: xy(r.train, key, 'loss'),
                borderColor: trainColor, backgroundColor: trainColor, borderWidth: 1.5,
                pointRadius: 0,
                showLine: true, borderDash: r.estimated && key === 'j' ? [5, 3] : [] });
      ds.push({ label: r.name + ' validation' + suffix, data: xy(r.val, key, 'loss'),
                borderColor: color, backgroundColor: color, borderWidth: 2.5, pointRadius: 3,
                showLine: true });
      if (r.targets.length)
        ds.push({ label: r.name + ' target reached', data: xy(r.targets, key, 'loss'),
                  borderColor: '#000', backgroundColor: '#ffd700', pointRadius: 8,
                  pointStyle: 'star', showLine: false });
    });
    const t = 'Loss against ' + label + (key === 'j' && anyEst ? ' — ESTIMATED energy' : '');
    chart('loss-' + key, t, 'line', ds, label, 'loss (nats/token)',
          { why: key === 'j' ? 'the energy of the intervals is unknown' : undefined });
  });

  // Power over time per domain, stacked, one chart per run.
  runs.forEach((r, k) => {
    const ds = r.domains.map((dom) => ({
      label: dom + (r.estimated ? ' (ESTIMATED)' : ''),
      // each interval's average power as a flat segment over the interval
      data: r.power.filter((p) => p[dom] !== null && p[dom] !== undefined)
        .flatMap((p) => [{ x: p.s0, y: p[dom] }, { x: p.s, y: p[dom] }]),
      borderColor: domainColors[dom] || colors[k % colors.length],
      backgroundColor: (domainColors[dom] || colors[k % colors.length]) + '99',
      fill: true, pointRadius: 0,
    }));
    chart('power-' + k, 'Power by domain, stacked: ' + r.name + est(r), 'line', ds,
          'training seconds', 'W', {
            why: r.power.length ? 'the power of every logged interval is unknown (the Runs ' +
              'table says why)' : 'no per-domain power in metrics.jsonl',
            scales: { x: { type: 'linear', title: { display: true, text: 'training seconds' } },
                      y: { stacked: true, beginAtZero: true,
                           title: { display: true, text: 'W' } } },
          });
  });

  // Joules per token over the run.
  chart('jpt', 'Joules per token over the run' + (anyEst ? ' — ESTIMATED energy' : ''), 'line',
        runs.map((r, k) => ({ label: r.name + est(r), data: xy(r.jpt, 'tokens', 'jpt'),
                              borderColor: colors[k % colors.length], pointRadius: 2,
                              borderDash: r.estimated ? [5, 3] : [] })),
        'tokens trained', 'J/token', { why: 'the energy of the intervals is unknown', zero: true });

  // Carbon intensity (left axis) and cumulative gCO2e (right axis).
  const cds = [];
  runs.forEach((r, k) => {
    const color = colors[k % colors.length];
    cds.push({ label: r.name + ' gCO2e/kWh', data: xy(r.carbon, 's', 'intensity'),
               borderColor: color, pointRadius: 0, yAxisID: 'y' });
    cds.push({ label: r.name + ' cumulative gCO2e' + est(r), data: xy(r.carbon, 's', 'g_total'),
               borderColor: color, borderDash: [4, 4], pointRadius: 0, yAxisID: 'y1' });
  });
  chart('carbon', 'Carbon intensity and emissions' + (anyEst ? ' — ESTIMATED energy' : ''),
        'line', cds, 'training seconds', 'gCO2e/kWh', {
          why: 'the energy of the intervals is unknown',
          scales: {
            x: { type: 'linear', title: { display: true, text: 'training seconds' } },
            y: { position: 'left', beginAtZero: true, title: { display: true, text: 'gCO2e/kWh' } },
            y1: { position: 'right', beginAtZero: true,
                  title: { display: true, text: 'gCO2e (cumulative)' },
                  grid: { drawOnChartArea: false } },
          },
        });

  // Ablation: measured tokens/J against the baseline beside the survey's claimed factors.
  if (D.ablation && D.ablation.rows) {
    const rows = D.ablation.rows;
    const e = D.ablation.energy_estimated ? ' (ESTIMATED energy)' : '';
    chart('ablation', 'Tokens per joule against the baseline: measured vs claimed' + e, 'bar', [
      { label: 'measured tokens/J factor' + e,
        data: rows.map((r) => (r.factor_vs_baseline === undefined ? null : r.factor_vs_baseline)),
        backgroundColor: '#2ca02c' },
      { label: "survey's claimed factor (cumulative)",
        data: rows.map((r) => r.claimed_cumulative), backgroundColor: '#bbbbbb' },
    ], 'row', 'factor (x baseline)', { labels: rows.map((r) => r.row), zero: true });
  }
  publish();
  const notice = document.getElementById('gt-script-failed');
  if (notice && check.errors.length === 0) notice.hidden = true;
})();
