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

TEST_CASE("vit-b-16 matches torchvision's 86,567,656 parameters and 17.56 G multiply-adds") {
  ModelAnalysis a = analyze_zoo("vit-b-16");
  CHECK(a.params == 86'567'656);  // torchvision's ViT_B_16_Weights: num_params
  CHECK(a.macs_per_sample == Approx(17.56e9).epsilon(0.005));  // its "GFLOPS" column
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{1000});
  // Patches become 196 tokens, the class token the 197th; positions are sized from that.
  auto layer = [&](const std::string& name) -> const LayerCosts& {
    for (const LayerCosts& c : a.layers) {
      if (c.layer.name == name) return c;
    }
    FAIL("no layer " << name);
    return a.layers.front();
  };
  CHECK(layer("patches_as_tokens").output_shape.dims == std::vector<std::int64_t>{196, 768});
  CHECK(layer("class_token").output_shape.dims == std::vector<std::int64_t>{197, 768});
  CHECK(layer("class_token").params == 768);
  CHECK(layer("encoder.pos_embedding").params == 197 * 768);
  // The parts torchvision registers: conv_proj, class_token, pos_embedding, 12 encoder blocks,
  // the final norm and the head.
  const std::int64_t d = 768, mlp = 3072;
  const std::int64_t block =
      2 * d + (3 * d * d + 3 * d + d * d + d) + 2 * d + (d * mlp + mlp) + (mlp * d + d);
  CHECK(a.params == (d * 3 * 16 * 16 + d) + d + 197 * d + 12 * block + 2 * d + (d * 1000 + 1000));
}

TEST_CASE("unet has milesial/Pytorch-UNet's 31,037,698 parameters and per-pixel class scores") {
  ModelAnalysis a = analyze_zoo("unet");
  CHECK(a.params == 31'037'698);  // n_channels 3, n_classes 2, bilinear False
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{2, 640, 960});
  OutputClasses classes = output_classes(a.output_shape);
  CHECK(classes.classes == 2);
  CHECK(classes.label_shape == std::vector<std::int64_t>{640, 960});
  CHECK(classes.labels_per_sample == 640 * 960);
  // Each skip joins the encoder's channels with the up-convolution's.
  for (auto [name, channels] : {std::pair{"up1.cat", 1024}, std::pair{"up4.cat", 128}}) {
    for (const LayerCosts& c : a.layers) {
      if (c.layer.name == name) CHECK(c.output_shape.dims.front() == channels);
    }
  }
}

TEST_CASE("the UNet++ authors' U-Net has their printed 7,759,521 parameters") {
  // MrGiovanni/UNetPlusPlus, model_logic.py, U_Net(color_type=1, num_class=1): "Total params:
  // 7,759,521". 32-512 filters, 3x3 same convolutions with bias, 2x2 stride-2 up-convolutions,
  // a 1x1 output; no batch norm.
  std::string yaml = R"(kind: model
name: unetpp-unet
input: {shape: [1, 96, 96]}
layers:
)";
  auto stage = [&](const std::string& name, int filters) {
    const std::string conv =
        ", out_channels: " + std::to_string(filters) + ", kernel: 3, padding: 1}\n";
    yaml += "  - {type: conv2d, name: " + name + ".0" + conv;
    yaml += "  - {type: relu, name: " + name + ".1}\n";
    yaml += "  - {type: conv2d, name: " + name + ".2" + conv;
    yaml += "  - {type: relu, name: " + name + "}\n";
  };
  const int filters[] = {32, 64, 128, 256, 512};
  for (int i = 0; i < 5; ++i) {
    if (i > 0) yaml += "  - {type: maxpool2d, kernel: 2, name: pool" + std::to_string(i) + "}\n";
    stage("conv" + std::to_string(i + 1) + "_1", filters[i]);
  }
  for (int i = 3; i >= 0; --i) {
    const std::string up = "up" + std::to_string(i + 1);
    yaml += "  - {type: conv_transpose2d, name: " + up +
            ", out_channels: " + std::to_string(filters[i]) + ", kernel: 2, stride: 2}\n";
    yaml += "  - {type: concat, name: " + up + ".cat, inputs: [" + up + ", conv" +
            std::to_string(i + 1) + "_1]}\n";
    stage("conv" + std::to_string(i + 1) + "_" + std::to_string(6 - i), filters[i]);
  }
  yaml += "  - {type: conv2d, name: output, out_channels: 1, kernel: 1}\n";
  ModelAnalysis a = analyze_model(load_model_from_string(yaml, "unetpp-unet"));
  CHECK(a.params == 7'759'521);
  CHECK(a.output_shape.dims == std::vector<std::int64_t>{1, 96, 96});
}

TEST_CASE("every zoo model analyses in fp16 with half the activation memory of fp32") {
  for (const char* name :
       {"mnist-cnn", "resnet-50", "mobilenet-v2", "bert-base", "vit-b-16", "unet"}) {
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
