// MG_HD marks a function that is compiled for the host and, under nvcc, for CUDA devices too:
// the device kernels (kernels/cuda/device_kernels.h) and the storage conversions they share with
// the CPU kernels (kernels/float16.h). A g++ build sees nothing.
#ifndef MEMONGER_KERNELS_HOST_DEVICE_H_
#define MEMONGER_KERNELS_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define MG_HD __host__ __device__
#else
#define MG_HD
#endif

#endif  // MEMONGER_KERNELS_HOST_DEVICE_H_
