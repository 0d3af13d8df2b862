// The zoo against published figures: parameter counts exactly, multiply-adds within 2%, and
// seed 001's torchsummary tables (output shapes and MB totals) as printed in the study.
#include <catch2/catch.hpp>

#include "core/model/analysis.h"
#include "support/paths.h"

using namespace epochcast;

namespace {

ModelAnalysis analyze_zoo(const std::string& name) {
  return analyze_model(load_model(test::zoo_model(name)));
}

std::vector<std::string> module_rows(const ModelAnalysis& a) {
  std::vector<std::string> rows;
  for (const LayerCosts& layer : a.layers) {
    if (!layer.display_name.empty()) {
      rows.push_back(layer.display_name + " " + layer.output_shape.str());
    }
  }
  return rows;
}

// torchsummary prints two decimals.
double rounded(double mb) {
  return std::round(mb * 100.0) / 100.0;
}

}  // namespace

TEST_CASE("spoken-digits-linear has seed 001's 12,102,220 parameters and torchsummary table") {
  ModelAnalysis a = analyze_zoo("spoken-digits-linear");
  CHECK(a.params == 12'102'220);
  // The study's formula: the sum of in x out plus the output sizes for the biases.
  CHECK(a.params == 12000 * 1000 + 1000 * 100 + 100 * 10 + 10 * 10 + (1000 + 100 + 10 + 10));
  CHECK(module_rows(a) == std::vector<std::string>{"Linear-1 [-1, 1, 1000]", "ReLU-2 [-1, 1, 1000]",
                                                   "Linear-3 [-1, 1, 100]", "ReLU-4 [-1, 1, 100]",
                                                   "Linear-5 [-1, 1, 10]", "Sigmoid-6 [-1, 1, 10]",
                                                   "Linear-7 [-1, 1, 10]"});
  CHECK(rounded(a.torchsummary_input_mb) == 0.05);
  CHECK(rounded(a.torchsummary_forward_backward_mb) == 0.02);
  CHECK(rounded(a.torchsummary_params_mb) == 46.17);
}

TEST_CASE("spoken-digits-conv1d has seed 001's 376,200 parameters and torchsummary table") {
  ModelAnalysis a = analyze_zoo("spoken-digits-conv1d");
  CHECK(a.params == 376'200);
  CHECK(module_rows(a) ==
        std::vector<std::string>{
            "Conv1d-1 [-1, 50, 12001]", "ReLU-2 [-1, 50, 12001]", "MaxPool1d-3 [-1, 50, 3000]",
            "Conv1d-4 [-1, 30, 3001]", "ReLU-5 [-1, 30, 3001]", "MaxPool1d-6 [-1, 30, 1000]",
            "Conv1d-7 [-1, 10, 1001]", "ReLU-8 [-1, 10, 1001]", "MaxPool1d-9 [-1, 10, 200]",
            "Linear-10 [-1, 100]", "Sigmoid-11 [-1, 100]", "Linear-12 [-1, 10]"});
  CHECK(rounded(a.torchsummary_input_mb) == 0.05);
  CHECK(rounded(a.torchsummary_forward_backward_mb) == 12.07);
  CHECK(rounded(a.torchsummary_params_mb) == 1.44);
  CHECK(rounded(a.torchsummary_input_mb + a.torchsummary_forward_backward_mb +
                a.torchsummary_params_mb) == 13.55);
}

TEST_CASE("mnist-cnn follows seed 003's layer structure with the documented channel choice") {
  ModelAnalysis a = analyze_zoo("mnist-cnn");
  // conv 4x4 (1->32), conv 4x4 (32->64), dense 1024->500, dense 500->10.
  CHECK(a.params == (16 * 32 + 32) + (16 * 32 * 64 + 64) + (1024 * 500 + 500) + (500 * 10 + 10));
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{10});
}

TEST_CASE("mobilenet-v2 matches torchvision's 3,504,872 parameters and ~300 M multiply-adds") {
  ModelAnalysis a = analyze_zoo("mobilenet-v2");
  CHECK(a.params == 3'504'872);
  CHECK(a.macs_per_sample == Approx(300e6).epsilon(0.02));  // Sandler et al., Table 3
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{1000});
}

TEST_CASE("resnet-50 matches torchvision's 25,557,032 parameters and ~4.1 G multiply-adds") {
  ModelAnalysis a = analyze_zoo("resnet-50");
  CHECK(a.params == 25'557'032);
  CHECK(a.macs_per_sample == Approx(4.1e9).epsilon(0.02));
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{1000});
}

TEST_CASE("bert-base has the encoder's 109,482,240 parameters plus a 2-class head") {
  ModelAnalysis a = analyze_zoo("bert-base");
  const std::int64_t d = 768, ffn = 3072, layers = 12;
  std::int64_t embeddings = (30522 + 512 + 2) * d + 2 * d;
  std::int64_t per_layer = (4 * d * d + 4 * d) + 2 * d + (d * ffn + ffn) + (ffn * d + d) + 2 * d;
  std::int64_t pooler = d * d + d;
  CHECK(embeddings + layers * per_layer + pooler == 109'482'240);
  CHECK(a.params == 109'482'240 + (d * 2 + 2));
  CHECK(a.params == Approx(110e6).epsilon(0.01));
}

TEST_CASE("gpt2-small has 124,439,808 parameters with the LM head tied to the embedding") {
  ModelAnalysis a = analyze_zoo("gpt2-small");
  CHECK(a.params == 124'439'808);
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{1024, 50257});
  const LayerCosts& head = a.layers.back();
  CHECK(head.layer.name == "lm_head");
  CHECK(head.params == 0);
  // The tied head still computes: 2 FLOPs per multiply-add over 1024 tokens.
  CHECK(head.forward_flops().per_sample.value() == 2LL * 1024 * 768 * 50257);
}

TEST_CASE("every zoo model analyses in fp16 with half the activation memory of fp32") {
  for (const char* name : {"mnist-cnn", "resnet-50", "mobilenet-v2", "bert-base"}) {
    ModelSpec spec = load_model(test::zoo_model(name));
    ModelAnalysis fp32 = analyze_model(spec);
    ModelAnalysis fp16 = analyze_model(spec, CostOptions{DType::float16, DType::float32});
    INFO(name);
    CHECK(fp16.params == fp32.params);
    CHECK(fp16.forward_flops.per_sample == fp32.forward_flops.per_sample);
    // Masks and indices do not shrink, so a bit over half.
    CHECK(fp16.saved_activations.per_sample.value() < fp32.saved_activations.per_sample.value());
    CHECK(fp16.saved_activations.per_sample.value() * 2 >=
          fp32.saved_activations.per_sample.value());
  }
}
