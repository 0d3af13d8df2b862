# Written by epochcast; edit and run `gnuplot cpu-spoken-digits-linear.gp` in this directory to restyle.
set terminal pngcairo noenhanced size 960,600
if (!exists("output")) { output = "cpu-spoken-digits-linear.png" }
set output output
data = "cpu-spoken-digits-linear.dat"
set title "cpu-spoken-digits-linear: measured vs predicted (calibrated-host-cpu-1core)"
set xlabel 'global batch (samples)'
set ylabel 'epoch time (s)'
set logscale xy
set grid
set key outside right
set xrange [1.542210825:165.995463]
set xtics ("2" 2, "4" 4, "8" 8, "16" 16, "32" 32, "64" 64, "128" 128)
set mxtics 1
set yrange [0.1597256641:4.922605337]
set ytics ("0.2" 0.2, "0.5" 0.5, "1" 1, "2" 2)
set mytics 1
plot data index 0 using 2:3 with linespoints lw 2 lc 1 pt 7 dt 1 title '1 GPU measured', data index 0 using 2:4 with linespoints lw 2 lc 1 pt 6 dt 2 title '1 GPU predicted', \
     data index 1 using 1:2 with points pt 6 ps 2.6 lw 1.5 lc rgb 'black' title 'held out (measured)'
