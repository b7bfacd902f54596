// dptrain's public API in one header: what a training program of your own needs.
//   tensors and devices       dpt::Tensor, dpt::Device, dpt::ImageShape
//   autograd and ops          dpt::autograd::backward, dpt::ops::conv2d, relu, cross_entropy ...
//   modules and models        dpt::nn::Module (subclass it), Conv2d, Linear, BatchNorm2d,
//                             Dropout, AdaptiveAvgPool2d, GELU, ...,
//                             register_model / build_model (models by name),
//   losses                    dpt::nn::Loss (subclass it), CrossEntropyLoss, MSELoss
//                             Sequential, Residual, lenet_module, resnet18, init_weights
//   optimizers                dpt::optim::SGD, Adam, AdamW, the lesson's optim::sgd, schedules
//   data                      dpt::data::Dataset (implement it), load_data, InMemoryDataset,
//                             transforms, BatchLoader
//   data parallelism          dpt::parallel::DataParallel, and the lesson's replicate,
//                             split_batch and allreduce; MpiRuntime for one process per device
//   training                  dpt::train::train (the concise loop), run_training
// Link dptrain::dptrain (find_package(dptrain)); ONNX export is dpt/export/onnx_export.h
// with dptrain::onnx.
#pragma once

#include "dpt/autograd/engine.h"
#include "dpt/core/device.h"
#include "dpt/core/image_shape.h"
#include "dpt/core/tensor.h"
#include "dpt/data/dataset.h"
#include "dpt/data/in_memory.h"
#include "dpt/data/loader.h"
#include "dpt/data/source.h"
#include "dpt/data/subset.h"
#include "dpt/data/transforms.h"
#include "dpt/nn/init.h"
#include "dpt/nn/layers.h"
#include "dpt/nn/loss.h"
#include "dpt/nn/lenet.h"
#include "dpt/nn/models.h"
#include "dpt/nn/module.h"
#include "dpt/nn/registry.h"
#include "dpt/ops/ops.h"
#include "dpt/optim/lr_schedule.h"
#include "dpt/optim/optimizer.h"
#include "dpt/optim/sgd.h"
#include "dpt/parallel/allreduce.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/mpi_communicator.h"
#include "dpt/parallel/replicate.h"
#include "dpt/train/train_concise.h"
#include "dpt/train/training_loop.h"
#include "dpt/version.h"
