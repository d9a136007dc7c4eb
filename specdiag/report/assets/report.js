/* specdiag HTML report: draws the timeline charts from the embedded JSON with uPlot.
 * Everything that comes from a log is inserted with textContent, never as markup. No network access. */
(function () {
  "use strict";
  var el = document.getElementById("specdiag-data");
  if (!el || typeof uPlot === "undefined") { return; }
  var data = JSON.parse(el.textContent);
  var tl = data.charts || {};
  var root = document.getElementById("charts");
  if (!root) { return; }
  var groups = tl.groups || [];
  var markers = tl.markers || [];
  var lanes = tl.lanes || [];
  var kindColors = tl.kind_colors || {};
  var k0 = tl.k0 || [];
  var k0Shade = tl.k0_shade || "rgba(0,158,115,0.13)";
  var timeLabel = tl.time_label || "log time (zone unknown)";
  // times before this are on the stand-in year of a log that printed none: shown without a year
  var yearKnownFrom = tl.year_known_from == null ? 315532800 : tl.year_known_from;
  if (!groups.length && !markers.length) { return; }

  var plots = [];
  var syncing = false;
  var cursorSync = uPlot.sync("specdiag");

  function tzDate(ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); }

  function fmt(v, unit) {
    if (v == null || isNaN(v)) { return "\u2013"; }
    var a = Math.abs(v);
    var s = a >= 1000 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : v.toFixed(3);
    return unit ? s + " " + unit : s;
  }

  function pad2(n) { return (n < 10 ? "0" : "") + n; }
  function fmtDay(t) {
    var d = new Date(t * 1e3);
    var md = pad2(d.getUTCMonth() + 1) + "-" + pad2(d.getUTCDate());
    return t >= yearKnownFrom ? d.getUTCFullYear() + "-" + md : md;
  }
  function fmtTime(t) {
    var d = new Date(t * 1e3);
    return fmtDay(t) + " " + pad2(d.getUTCHours()) + ":" + pad2(d.getUTCMinutes()) + ":" + pad2(d.getUTCSeconds()) +
      "." + String(Math.floor((t % 1) * 1000 + 1000)).slice(1);
  }

  function syncScale(u, key) {
    if (key !== "x" || syncing) { return; }
    syncing = true;
    var mn = u.scales.x.min, mx = u.scales.x.max;
    plots.forEach(function (o) { if (o !== u) { o.setScale("x", { min: mn, max: mx }); } });
    syncing = false;
  }

  // K=0 stretches as shaded bands behind every chart: no SpecDecoding line is logged there
  function drawK0(u) {
    if (!k0.length) { return; }
    var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height, left = u.bbox.left, w = u.bbox.width;
    ctx.save();
    ctx.fillStyle = k0Shade;
    k0.forEach(function (r) {
      var a = Math.max(left, u.valToPos(r[0], "x", true)), b = Math.min(left + w, u.valToPos(r[1], "x", true));
      if (b > a) { ctx.fillRect(a, top, b - a, h); }
    });
    ctx.restore();
  }

  // nulls that only align series sampled at different times are joined over (undefined); the real gaps,
  // intervals that were never logged, stay null and break the line
  function markHoles(g) {
    var holes = g.holes || [];
    for (var j = 1; j < g.data.length; j++) {
      var col = g.data[j], keep = {};
      (holes[j - 1] || []).forEach(function (i) { keep[i] = true; });
      for (var i = 0; i < col.length; i++) {
        if (col[i] === null && !keep[i]) { col[i] = undefined; }
      }
    }
  }

  function drawMarkerLines(u) {
    if (!markers.length) { return; }
    var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height, left = u.bbox.left, w = u.bbox.width;
    ctx.save();
    ctx.lineWidth = Math.max(1, uPlot.pxRatio);
    ctx.setLineDash([4 * uPlot.pxRatio, 3 * uPlot.pxRatio]);
    markers.forEach(function (m) {
      var x = Math.round(u.valToPos(m.t, "x", true));
      if (x < left || x > left + w) { return; }
      ctx.strokeStyle = kindColors[m.kind] || "#888";
      ctx.globalAlpha = 0.7;
      ctx.beginPath();
      ctx.moveTo(x + 0.5, top);
      ctx.lineTo(x + 0.5, top + h);
      ctx.stroke();
    });
    ctx.restore();
  }

  // every chart reserves the same room left and right, so that their time axes line up; a phone gets less, so
  // that the plot keeps most of the width
  var NARROW = root.clientWidth < 560;
  var LEFT = NARROW ? 56 : 64, RIGHT = NARROW ? 44 : 56, LABEL = 20;
  var X_AXIS = 54;  // room for the time axis: two lines of tick values (time, then the day)
  var LANE = 26;    // the height of one rank's lane in the events chart
  function hm(t, secs) {
    var d = new Date(t * 1e3);
    return pad2(d.getUTCHours()) + ":" + pad2(d.getUTCMinutes()) + (secs ? ":" + pad2(d.getUTCSeconds()) : "");
  }
  function xAxis() {
    return {
      stroke: "#555", grid: { stroke: "#eee" }, ticks: { stroke: "#ccc" }, label: timeLabel, labelSize: LABEL,
      size: X_AXIS,
      values: function (u, splits) {
        var span = u.scales.x.max - u.scales.x.min;
        var lastDay = null;
        return splits.map(function (t) {
          var day = fmtDay(t);
          var s = hm(t, span < 600);
          if (day !== lastDay) { s += "\n" + day; lastDay = day; }
          return s;
        });
      },
    };
  }
  function spacerAxis(scale) {
    return { scale: scale, side: 1, size: RIGHT, label: " ", labelSize: LABEL, stroke: "transparent", grid: { show: false },
      ticks: { show: false }, values: function (u, splits) { return splits.map(function () { return ""; }); } };
  }

  function zeroBased(u, mn, mx) {
    if (mn == null || mx == null) { return [0, 1]; }
    var lo = Math.min(0, mn), hi = Math.max(0, mx);
    if (hi === lo) { hi = lo + 1; }
    return uPlot.rangeNum(lo, hi, 0.1, true);
  }

  function width(box) { return Math.max(240, box.clientWidth - 2); }

  // a legend never stands taller than its chart: past that height it scrolls in its own box
  function fitLegend(u) {
    var legend = u.root.querySelector(".u-legend");
    var wrap = u.root.querySelector(".u-wrap");
    if (!legend || !wrap) { return; }
    legend.classList.remove("u-scroll");
    legend.style.maxHeight = "";
    if (legend.offsetHeight > wrap.offsetHeight) {
      legend.classList.add("u-scroll");
      legend.style.maxHeight = wrap.offsetHeight + "px";
    }
  }

  function addSection(title, note) {
    var sec = document.createElement("div");
    sec.className = "chart";
    var h = document.createElement("h3");
    h.textContent = title;
    sec.appendChild(h);
    if (note) {
      var p = document.createElement("p");
      p.className = "note";
      p.textContent = note;
      sec.appendChild(p);
    }
    var box = document.createElement("div");
    box.className = "plot";
    sec.appendChild(box);
    root.appendChild(sec);
    return box;
  }

  // ---- one chart per group of series (acceptance, cache hits, throughput, KV usage, requests)
  groups.forEach(function (g) {
    var box = addSection(g.title, g.note);
    var units = g.units || [];
    var series = [{ label: timeLabel, value: function (u, v) { return v == null ? "\u2013" : fmtTime(v); } }];
    markHoles(g);
    g.series.forEach(function (s) {
      series.push({
        label: s.label,
        scale: s.unit || "_",
        stroke: s.color,
        width: 1.5,
        spanGaps: false,
        points: { size: 4 },
        value: (function (unit) { return function (u, v) { return fmt(v, unit); }; })(s.unit),
      });
    });
    var axes = [xAxis()];
    units.forEach(function (unit, i) {
      axes.push({
        scale: unit || "_",
        side: i === 0 ? 3 : 1,
        label: unit || " ",
        labelSize: LABEL,
        stroke: "#555",
        size: i === 0 ? LEFT : RIGHT,
        grid: i === 0 ? { stroke: "#eee" } : { show: false },
        ticks: { stroke: "#ccc" },
      });
    });
    if (units.length < 2) { axes.push(spacerAxis(units[0] || "_")); }
    var scales = { x: { time: true } };
    units.forEach(function (unit) {
      var r = (g.ranges || {})[unit];
      // counts, rates and throughputs are compared from zero, so that a fall looks like one
      scales[unit || "_"] = r ? { range: r } : { range: zeroBased };
    });
    var opts = {
      width: width(box),
      height: 190,
      tzDate: tzDate,
      series: series,
      axes: axes,
      scales: scales,
      legend: { live: true },
      cursor: { sync: { key: cursorSync.key }, drag: { x: true, y: false } },
      hooks: { drawClear: [drawK0], draw: [drawMarkerLines], setScale: [syncScale] },
    };
    var u = new uPlot(opts, g.data, box);
    u.root.setAttribute("data-points", String(g.points || 0));
    fitLegend(u);
    plots.push(u);
  });

  // ---- the event lanes: one row per rank ("all" first), one dot per marker, colour by kind
  if (markers.length) {
    var box = addSection("Events (per rank)", tl.markers_note || "");
    var laneIndex = {};
    lanes.forEach(function (l, i) { laneIndex[l] = i; });
    var xs = tl.event_xs || [tl.tmin, tl.tmax];
    var empty = xs.map(function () { return null; });
    var tip = document.createElement("div");
    tip.className = "tip";
    tip.hidden = true;

    var drawDots = function (u) {
      var ctx = u.ctx, left = u.bbox.left, w = u.bbox.width;
      ctx.save();
      markers.forEach(function (m) {
        var x = u.valToPos(m.t, "x", true);
        if (x < left - 1 || x > left + w + 1) { return; }
        var lane = laneIndex[m.lane];
        if (lane == null) { return; }
        var y = u.valToPos(lane, "y", true);
        var color = kindColors[m.kind] || "#888";
        ctx.beginPath();
        if (m.kind === "finding") {
          // a ring, so that the event it points at (same time, same rank) stays visible inside it
          ctx.strokeStyle = color;
          ctx.lineWidth = 2 * uPlot.pxRatio;
          ctx.arc(x, y, 8 * uPlot.pxRatio, 0, 2 * Math.PI);
          ctx.stroke();
        } else {
          ctx.fillStyle = color;
          ctx.strokeStyle = "#fff";
          ctx.lineWidth = uPlot.pxRatio;
          ctx.arc(x, y, 4.5 * uPlot.pxRatio, 0, 2 * Math.PI);
          ctx.fill();
          ctx.stroke();
        }
      });
      ctx.restore();
      drawMarkerLines(u);
    };

    var showTip = function (u) {
      var l = u.cursor.left, t = u.cursor.top;
      if (l == null || l < 0) { tip.hidden = true; return; }
      var near = markers.filter(function (m) {
        var lane = laneIndex[m.lane];
        return Math.abs(u.valToPos(m.t, "x") - l) <= 6 && Math.abs(u.valToPos(lane, "y") - t) <= 10;
      });
      if (!near.length) { tip.hidden = true; return; }
      while (tip.firstChild) { tip.removeChild(tip.firstChild); }
      near.slice(0, 8).forEach(function (m) {
        var row = document.createElement("div");
        var b = document.createElement("b");
        b.textContent = m.kind + (m.rule ? " " + m.rule : "") + (m.rank ? " @" + m.rank : "");
        row.appendChild(b);
        row.appendChild(document.createTextNode(" " + fmtTime(m.t) + " \u2014 " + (m.label || "")));
        tip.appendChild(row);
      });
      if (near.length > 8) {
        var more = document.createElement("div");
        more.textContent = "+" + (near.length - 8) + " more";
        tip.appendChild(more);
      }
      tip.hidden = false;
      tip.style.left = Math.round(l + 12) + "px";
      tip.style.top = Math.round(t + 12) + "px";
    };

    var opts = {
      width: width(box),
      // the time axis and its label, a margin, then one lane per rank: labels one lane apart never touch
      height: X_AXIS + LABEL + 16 + LANE * Math.max(1, lanes.length),
      tzDate: tzDate,
      series: [{}, { label: "events", scale: "y", show: false }],
      legend: { show: false },
      scales: { x: { time: true }, y: { range: [-0.6, Math.max(0, lanes.length - 1) + 0.6] } },
      axes: [
        xAxis(),
        {
          scale: "y", stroke: "#555", size: LEFT, label: " ", labelSize: LABEL, grid: { stroke: "#f2f2f2" },
          splits: function () { return lanes.map(function (_, i) { return i; }); },
          values: function (u, splits) { return splits.map(function (i) { return lanes[i] == null ? "" : lanes[i]; }); },
        },
        spacerAxis("y"),
      ],
      cursor: { sync: { key: cursorSync.key }, drag: { x: true, y: false }, points: { show: false } },
      hooks: { drawClear: [drawK0], draw: [drawDots], setScale: [syncScale], setCursor: [showTip] },
    };
    var ev = new uPlot(opts, [xs, empty], box);
    ev.root.querySelector(".u-over").appendChild(tip);
    ev.root.setAttribute("data-markers", String(markers.length));
    plots.push(ev);
  }

  var pending = null;
  window.addEventListener("resize", function () {
    if (pending) { cancelAnimationFrame(pending); }
    pending = requestAnimationFrame(function () {
      plots.forEach(function (u) {
        var w = width(u.root.parentNode);
        u.setSize({ width: w, height: u.height });
        fitLegend(u);
      });
    });
  });
  document.body.setAttribute("data-charts", String(plots.length));
})();
