# Written by epochcast; edit and run `gnuplot gpu-mnist-cnn.gp` in this directory to restyle.
set terminal pngcairo noenhanced size 960,600
if (!exists("output")) { output = 'gpu-mnist-cnn.png' }
set output output
data = 'gpu-mnist-cnn.dat'
set title "gpu-mnist-cnn: measured vs predicted (calibrated-h100-sxm)"
set xlabel 'global batch (samples)'
set ylabel 'epoch time (s)'
set logscale xy
set grid
set key outside right
plot data index 0 using 2:3 with linespoints lc 1 pt 7 title '1 GPU measured', data index 0 using 2:4 with linespoints lc 1 dt 2 pt 6 title '1 GPU predicted'
