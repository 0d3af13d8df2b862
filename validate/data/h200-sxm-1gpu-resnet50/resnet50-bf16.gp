# Written by epochcast; edit and run `gnuplot resnet50-bf16.gp` in this directory to restyle.
set terminal pngcairo noenhanced size 960,600
if (!exists("output")) { output = "resnet50-bf16.png" }
set output output
data = "resnet50-bf16.dat"
set title "resnet50-bf16: measured vs predicted (calibrated-h200-sxm)"
set xlabel 'global batch (samples)'
set ylabel 'epoch time (s)'
set logscale xy
set grid
set key outside right
set xrange [13.45434264:304.4370214]
set xtics ("16" 16, "32" 32, "64" 64, "128" 128, "256" 256)
set mxtics 1
set yrange [4.763108414:18.23124326]
set ytics ("5" 5, "7" 7, "10" 10, "15" 15)
set mytics 1
plot data index 0 using 2:3 with linespoints lw 2 lc 1 pt 7 dt 1 title '1 GPU measured', data index 0 using 2:4 with linespoints lw 2 lc 1 pt 6 dt 2 title '1 GPU predicted', \
     data index 1 using 1:2 with points pt 6 ps 2.6 lw 1.5 lc rgb 'black' title 'held out (measured)'
