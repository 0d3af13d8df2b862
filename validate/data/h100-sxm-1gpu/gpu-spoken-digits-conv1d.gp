# Written by epochcast; edit and run `gnuplot gpu-spoken-digits-conv1d.gp` in this directory to restyle.
set terminal pngcairo noenhanced size 960,600
if (!exists("output")) { output = 'gpu-spoken-digits-conv1d.png' }
set output output
data = 'gpu-spoken-digits-conv1d.dat'
set title "gpu-spoken-digits-conv1d: measured vs predicted (calibrated-h100-sxm)"
set xlabel 'global batch (samples)'
set ylabel 'epoch time (s)'
set logscale xy
set grid
set key outside right
plot data index 0 using 2:3 with linespoints lc 1 pt 7 title '1 GPU measured', data index 0 using 2:4 with linespoints lc 1 dt 2 pt 6 title '1 GPU predicted'
