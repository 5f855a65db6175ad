set terminal pngcairo size 1400,1200 font 'sans,10'
set output 'latency.png'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set datafile missing '?'
set key top right
set grid ytics
set xtics noenhanced
set key noenhanced
set logscale y
set multiplot layout 3,1
set title 'p50 latency (ms, log scale)'
plot 'latency_p50.dat' using 2:xtic(1) title columnheader(2), 'latency_p50.dat' using 3 title columnheader(3), 'latency_p50.dat' using 4 title columnheader(4), 'latency_p50.dat' using 5 title columnheader(5), 'latency_p50.dat' using 6 title columnheader(6)
set title 'p99 latency (ms, log scale)'
plot 'latency_p99.dat' using 2:xtic(1) title columnheader(2), 'latency_p99.dat' using 3 title columnheader(3), 'latency_p99.dat' using 4 title columnheader(4), 'latency_p99.dat' using 5 title columnheader(5), 'latency_p99.dat' using 6 title columnheader(6)
set title 'max latency (ms, log scale)'
plot 'latency_max.dat' using 2:xtic(1) title columnheader(2), 'latency_max.dat' using 3 title columnheader(3), 'latency_max.dat' using 4 title columnheader(4), 'latency_max.dat' using 5 title columnheader(5), 'latency_max.dat' using 6 title columnheader(6)
unset multiplot
