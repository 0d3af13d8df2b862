# Written by epochcast; edit and run `gnuplot gpu-spoken-digits-linear.gp` in this directory to restyle.
set terminal pngcairo noenhanced size 960,600
if (!exists("output")) { output = "gpu-spoken-digits-linear.png" }
set output output
data = "gpu-spoken-digits-linear.dat"
set title "gpu-spoken-digits-linear: measured vs predicted (calibrated-h200-sxm)"
set xlabel 'global batch (samples)'
set ylabel 'epoch time (s)'
set logscale xy
set grid
set key outside right
set xrange [2.828427125:1448.154688]
set xtics ("4" 4, "8" 8, "16" 16, "32" 32, "64" 64, "128" 128, "256" 256, "512" 512, "1024" 1024)
set mxtics 1
set yrange [0.2125292905:0.7357046556]
set ytics ("0.25" 0.25, "0.3" 0.3, "0.4" 0.4, "0.5" 0.5, "0.6" 0.6, "0.7" 0.7)
set mytics 1
plot data index 0 using 2:3 with linespoints lw 2 lc 1 pt 7 dt 1 title '1 GPU measured', data index 0 using 2:4 with linespoints lw 2 lc 1 pt 6 dt 2 title '1 GPU predicted', \
     data index 1 using 1:2 with points pt 6 ps 2.6 lw 1.5 lc rgb 'black' title 'held out (measured)'
