// Decode plus augment, in images per second: one pass of the seeded loader over an image
// folder streamed from its files (every picture decoded for its batch, as --data-cache 0
// trains), with a random crop, a flip and a normalization, on --threads threads, one
// batch prefetched. bench/loader_throughput.sh runs it beside torchvision's ImageFolder.
//   usage: loader_throughput FOLDER [--size N] [--threads N] [--batch N] [--passes N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dpt/data/loader.h"
#include "dpt/data/source.h"
#include "dpt/data/transforms.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: loader_throughput FOLDER [--size N] [--threads N] [--batch N] [--passes N]\n");
    return 2;
  }
  dpt::data::DataOptions options;
  options.data_dir = argv[1];
  options.data_format = "folder";
  options.data_cache = 0;  // every pass decodes, as torchvision's does
  options.random_crop = 4;
  options.hflip = true;
  options.test_split = 0;
  int threads = 2, passes = 2;
  int64_t batch = 256;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::atol(argv[i + 1]);
    if (flag == "--size") options.image_size = value;
    else if (flag == "--threads") threads = static_cast<int>(value);
    else if (flag == "--batch") batch = value;
    else if (flag == "--passes") passes = static_cast<int>(value);
  }
  const dpt::data::LoadedData loaded = dpt::data::load_data(options);
  // The fixed normalization torchvision's side uses too (ImageNet's statistics).
  const auto data = dpt::data::transformed(
      loaded.train, {dpt::data::normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f})});
  dpt::data::BatchLoader loader(*data, batch, /*shuffle=*/true, 0, /*augment=*/true);
  loader.set_threads(threads);
  loader.set_prefetch(1);
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    loader.start_epoch(pass);
    const auto start = std::chrono::steady_clock::now();
    dpt::data::Batch b;
    int64_t images = 0;
    while (loader.next(b)) images += b.labels.dim(0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(images) / seconds);
  }
  std::printf("dptrain: %.0f images/s (%s, %s images, %d threads, best of %d passes)\n", best, options.data_dir.c_str(),
              data->shape().str().c_str(), threads, passes);
  return 0;
}
