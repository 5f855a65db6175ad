set terminal pngcairo size 1400,1000 font 'sans,10'
set output 'rss.png'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set datafile missing '?'
set key top right
set grid ytics
set xtics noenhanced
set key noenhanced
set multiplot layout 2,1
set title 'Server RSS per idle keep-alive connection (KiB)'
set yrange [0:*]
plot 'rss_idle.dat' using 2:xtic(1) title columnheader(2), 'rss_idle.dat' using 3 title columnheader(3), 'rss_idle.dat' using 4 title columnheader(4), 'rss_idle.dat' using 5 title columnheader(5), 'rss_idle.dat' using 6 title columnheader(6)
set title 'Server RSS at the end of each scenario (MiB, log scale)'
set logscale y
plot 'rss_load.dat' using 2:xtic(1) title columnheader(2), 'rss_load.dat' using 3 title columnheader(3), 'rss_load.dat' using 4 title columnheader(4), 'rss_load.dat' using 5 title columnheader(5), 'rss_load.dat' using 6 title columnheader(6)
unset multiplot
