# Written by epochcast; edit and run `gnuplot gpu-mnist-cnn.gp` in this directory to restyle.
set terminal pngcairo noenhanced size 960,600
if (!exists("output")) { output = "gpu-mnist-cnn.png" }
set output output
data = "gpu-mnist-cnn.dat"
set title "gpu-mnist-cnn: measured vs predicted (calibrated-h200-sxm)"
set xlabel 'global batch (samples)'
set ylabel 'epoch time (s)'
set logscale xy
set grid
set key outside right
set xrange [5.656854249:2896.309376]
set xtics ("8" 8, "16" 16, "32" 32, "64" 64, "128" 128, "256" 256, "512" 512, "1024" 1024, "2048" 2048)
set mxtics 1
set yrange [1.487378363:14.57363324]
set ytics ("1.5" 1.5, "2" 2, "3" 3, "5" 5, "7" 7, "10" 10)
set mytics 1
plot data index 0 using 2:3 with linespoints lw 2 lc 1 pt 7 dt 1 title '1 GPU measured', data index 0 using 2:4 with linespoints lw 2 lc 1 pt 6 dt 2 title '1 GPU predicted', \
     data index 1 using 1:2 with points pt 6 ps 2.6 lw 1.5 lc rgb 'black' title 'held out (measured)'
