set terminal pngcairo size 1400,600 font 'sans,10'
set output 'throughput.png'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set datafile missing '?'
set key top right
set grid ytics
set xtics noenhanced
set key noenhanced
set multiplot title "Requests per second, 1 core(s) per server\n2026-12-02 19:12 UTC, Intel(R) Xeon(R) Processor, 2 CPUs, 24 GiB, Linux 6.18.44-fc-v1045" noenhanced
set ylabel 'thousand requests/s'
set yrange [0:*]
set bmargin 3
set origin 0.0,0
set size 0.84,0.92

plot 'throughput0.dat' using 2:xtic(1) title columnheader(2), 'throughput0.dat' using 3 title columnheader(3), 'throughput0.dat' using 4 title columnheader(4), 'throughput0.dat' using 5 title columnheader(5), 'throughput0.dat' using 6 title columnheader(6)
unset ylabel
set origin 0.84,0
set size 0.16000000000000003,0.92
unset key
plot 'throughput1.dat' using 2:xtic(1) title columnheader(2), 'throughput1.dat' using 3 title columnheader(3), 'throughput1.dat' using 4 title columnheader(4), 'throughput1.dat' using 5 title columnheader(5), 'throughput1.dat' using 6 title columnheader(6)
unset ylabel
unset multiplot
