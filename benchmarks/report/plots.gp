# The plots of docs/benchmarks.md, from the data files make_report.py writes.
#   gnuplot -e "dir='build/release/bench-report'; img='docs/img'" benchmarks/report/plots.gp
set terminal pngcairo size 900,600 enhanced font 'sans,11'
set grid xtics ytics mxtics mytics lc rgb '#dddddd'
set key at screen 0.5, screen 0.035 center bottom horizontal maxrows 1 box
set bmargin 7
set datafile missing 'NaN'
set style line 1 lw 2 pt 7 ps 1.2 lc rgb '#1b9e77'
set style line 2 lw 2 pt 5 ps 1.2 lc rgb '#d95f02'
set style line 3 lw 2 pt 9 ps 1.2 lc rgb '#7570b3'
set style line 4 lw 2 pt 13 ps 1.2 lc rgb '#e7298a'
set style line 5 lw 2 pt 11 ps 1.2 lc rgb '#666666' dt 2

set logscale xy 10
set xrange [500:2000000]
set format x '10^{%L}'
set xlabel 'pending tasks (log scale)'
set ylabel 'ns of CPU per task, median (log scale)'

load sprintf('%s/ranges.gp', dir)
do for [wl in 'addcancel addatcancel addexpire'] {
  set output sprintf('%s/timer_%s.png', img, wl)
  set title sprintf('timer\_bench %s: cost per task against pending tasks', \
                    wl eq 'addcancel' ? 'AddCancel (add, then cancel)' : \
                    wl eq 'addatcancel' ? 'AddAtCancel (add at an absolute deadline, then cancel)' : \
                    'AddExpire (add, then expire and run)')
  # A third of a decade of room around the data (ranges.gp, from make_report.py), so no point
  # sits on a border.
  set yrange [value('lo_'.wl) / 1.5 : value('hi_'.wl) * 1.5]
  plot for [i=2:5] sprintf('%s/timer_%s.dat', dir, wl) using 1:i with linespoints ls (i-1) \
       title columnhead(i)
}

# timer_burst: lateness CDF of the median run of each implementation (make_report.py).
unset logscale
set logscale x 10
set format x '%g'
set xrange [*:*]
set yrange [0:1]
set xlabel 'lateness, ms (log scale; below 10 us drawn at 10 us)'
set ylabel 'fraction of tasks run at most this late'
set title 'timer\_burst: 1M tasks added at once, delays 0..1000 ms, real clock'
set output sprintf('%s/timer_burst_cdf.png', img)
plot sprintf('%s/timer_burst_cdf.dat', dir) using 2:1 with lines ls 1 title columnhead(2), \
     '' using 3:1 with lines ls 2 title columnhead(3)
set xtics auto
set format y '%g'

unset logscale
unset format
set logscale x 10
set xrange [7000:300000]
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
set xtics ('10k' 10000, '25k' 25000, '50k' 50000, '100k' 100000, '200k' 200000)
set xlabel 'request rate, requests/s (log scale)'
set ylabel 'process CPU seconds per 1M requests'
set title 'purgatory\_bench: CPU time against request rate (3 keys of 1000, 100 ms timeout)'
set output sprintf('%s/purgatory_cpu.png', img)
plot sprintf('%s/purgatory.dat', dir) using 1:2 with linespoints ls 1 title 'ours', \
     '' using 1:3 with linespoints ls 2 title 'naive', \
     '' using 1:4 with linespoints ls 5 title 'harness alone', \
     sprintf('%s/purgatory_unfinished.dat', dir) using 1:2 with points pt 2 ps 2 lw 2 \
       lc rgb '#d95f02' notitle, \
     '' using 1:2:3 with labels center offset 0,1.3 notitle

