set terminal pngcairo size 1200,500 font 'sans,10'
set output 'overload.png'
set style fill solid 0.85 border -1
set boxwidth 0.6
set datafile missing '?'
set grid ytics
set xrange [-0.5:4.5]
set xtics ("goro-shed" 0, "goro" 1, "go" 2, "nginx" 3, "nginx-req" 4) noenhanced
set multiplot layout 1,2 title "Overload: /cpu?ms=1 at 10× capacity, 1000 connections, 1 server core\n2026-12-02, vm" noenhanced
set title 'Goodput, % of the capacity (goal ≥ 90)'
set yrange [0:110]
set arrow 1 from graph 0, first 90 to graph 1, first 90 nohead dt 2 lw 2 lc rgb '#cc0000'
plot 'overload.dat' using 1:3 with boxes lc rgb '#4477aa' notitle
unset arrow 1
set title 'Served p99 ÷ unloaded p99, log scale (goal ≤ 3)'
set logscale y
set yrange [0.5:*]
set arrow 2 from graph 0, first 3 to graph 1, first 3 nohead dt 2 lw 2 lc rgb '#cc0000'
set label "none served" at 1, first 1 center front
set label "none served" at 2, first 1 center front
plot 'overload.dat' using 1:4 with boxes lc rgb '#ee7733' notitle
unset multiplot
