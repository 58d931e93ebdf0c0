/* A stand-in for the CUDA driver's library (libcuda.so.1) that reports one
   device and offers nothing else. cuda_backend_test loads it before the
   plugin asks, to check that the plugin hands over to the backend wherever
   the driver reports a device. */
#define EXPORT __attribute__((visibility("default")))

EXPORT int cuInit(unsigned int flags) {
  (void)flags;
  return 0; /* CUDA_SUCCESS */
}

EXPORT int cuDeviceGetCount(int *count) {
  *count = 1;
  return 0;
}
