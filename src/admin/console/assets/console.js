// Gatehouse console enhancements. Every form works without this file; it only adds conveniences (copy buttons, charts).
(function () {
  'use strict';
  function onReady(fn) {
    if (document.readyState !== 'loading') fn();
    else document.addEventListener('DOMContentLoaded', fn);
  }
  function copyButtons(root) {
    root.querySelectorAll('[data-copy-target]').forEach(function (button) {
      if (button.dataset.bound) return;
      button.dataset.bound = '1';
      button.hidden = false;
      button.addEventListener('click', function () {
        var target = document.getElementById(button.dataset.copyTarget);
        if (!target || !navigator.clipboard) return;
        navigator.clipboard.writeText(target.textContent || '').then(function () {
          button.textContent = 'Copied';
        });
      });
    });
  }
  function charts(root) {
    if (typeof window.uPlot !== 'function') return;
    root.querySelectorAll('[data-chart]').forEach(function (el) {
      if (el.dataset.bound) return;
      el.dataset.bound = '1';
      var spec;
      try {
        spec = JSON.parse(el.dataset.chart);
      } catch {
        return;
      }
      var style = getComputedStyle(document.documentElement);
      var text = style.getPropertyValue('--text').trim() || '#1b1f24';
      var series = [{}].concat(
        spec.series.map(function (s) {
          return { label: s.label, stroke: s.color, width: 2 };
        }),
      );
      var axis = { stroke: text, grid: { stroke: style.getPropertyValue('--border').trim() || '#ccc' } };
      var width = Math.max(260, el.clientWidth - 16);
      new window.uPlot({ width: width, height: 200, series: series, axes: [axis, axis] }, spec.data, el);
      el.classList.add('chart-drawn');
    });
  }
  function enhance(root) {
    copyButtons(root);
    charts(root);
  }
  onReady(function () {
    enhance(document);
    document.body.addEventListener('htmx:afterSwap', function (e) {
      enhance(e.target);
    });
  });
})();
