# Written by epochcast; edit and run `gnuplot cpu-spoken-digits-conv1d.gp` in this directory to restyle.
set terminal pngcairo noenhanced size 960,600
if (!exists("output")) { output = "cpu-spoken-digits-conv1d.png" }
set output output
data = "cpu-spoken-digits-conv1d.dat"
set title "cpu-spoken-digits-conv1d: measured vs predicted (calibrated-host-cpu-1core)"
set xlabel 'global batch (samples)'
set ylabel 'epoch time (s)'
set logscale xy
set grid
set key outside right
set xrange [0.8408964153:19.02731384]
set xtics ("1" 1, "2" 2, "4" 4, "8" 8, "16" 16)
set mxtics 1
set yrange [3.873527437:5.158370788]
set ytics ("4" 4, "4.2" 4.2, "4.4" 4.4, "4.6" 4.6, "4.8" 4.8, "5" 5)
set mytics 1
plot data index 0 using 2:3 with linespoints lw 2 lc 1 pt 7 dt 1 title '1 GPU measured', data index 0 using 2:4 with linespoints lw 2 lc 1 pt 6 dt 2 title '1 GPU predicted', \
     data index 1 using 1:2 with points pt 6 ps 2.6 lw 1.5 lc rgb 'black' title 'held out (measured)'
