// CIFAR-10 and CIFAR-100 in their binary versions ("CIFAR-10 binary version (suitable for C
// programs)"): 32x32 colour images in records of a label byte (CIFAR-100: a coarse and a
// fine label byte) and 3072 pixel bytes, the red, green and blue planes in turn.
//   CIFAR-10:  data_batch_1.bin .. data_batch_5.bin, test_batch.bin, batches.meta.txt
//   CIFAR-100: train.bin, test.bin, fine_label_names.txt, coarse_label_names.txt
// Class names come from the meta files beside the batches.
#pragma once

#include <filesystem>
#include <string>

#include "dpt/data/idx_dataset.h"
#include "dpt/data/in_memory.h"

namespace dpt::data {

enum class CifarLabels { fine, coarse };  // CIFAR-100's two label sets (CIFAR-10 has one)

// Whether `dir` holds CIFAR-10's or CIFAR-100's batch files.
bool is_cifar10_dir(const std::filesystem::path& dir);
bool is_cifar100_dir(const std::filesystem::path& dir);

// One split of the CIFAR folder `dir` (10 or 100, told by its files). Throws DataError
// naming the file for a missing batch, a file that is not a whole number of records, or a
// label outside the classes its meta file names.
InMemoryDataset load_cifar(const std::filesystem::path& dir, Split split, CifarLabels labels = CifarLabels::fine);

}  // namespace dpt::data
