// The slowest of N GPUs: GPUs of one model differ in speed (power management and manufacturing
// variability: Sinha et al., "Not All GPUs Are Created Equal", SC22, measured an average
// performance variation of 8% across the identical V100s and MI60s of five clusters), and a
// synchronous data-parallel step waits for its slowest rank. With speeds spread normally, a
// coefficient of variation s across GPUs, the slowest of N is expected 1 + s e_N times slower
// than the average, e_N the expected maximum of N standard normal draws.
#pragma once

namespace epochcast::sim {

// E[max of n independent standard normal draws]: 0 for 1, 1/sqrt(pi) for 2, 1.42 for 8, 3.24
// for 1024 (numerical integration; deterministic).
double expected_normal_maximum(int n);

// How much longer the slowest of `gpus` GPUs takes for the same work, at a speed spread
// (coefficient of variation) of `spread`: 1 + spread e_gpus.
double slowest_gpu_factor(int gpus, double spread);

}  // namespace epochcast::sim
