/* A test NVML: a real shared library exporting the NVML entry points Genie's
 * GPU monitor uses (loaded in place of libnvidia-ml.so.1 through
 * GENIE_NVML_LIBRARY). Its GPUs and their metrics come from the file named
 * by GENIE_TEST_NVML_FILE, read again at every call, so a test changes
 * utilisation or temperature while a process runs. One GPU per line:
 *
 *   NAME UTILIZATION_PERCENT TEMPERATURE_C MEMORY_TOTAL_MIB MEMORY_USED_MIB [PCI_BUS_ID]
 *
 * PCI_BUS_ID ("0000:65:00.0"; default 0000:0N:00.0 for GPU N-1) is what
 * nvmlDeviceGetPciInfo_v3 reports.
 *
 * Without the variable nvmlInit fails like a machine without a driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;

enum { OK = 0, ERR_INVALID_ARGUMENT = 2, ERR_NOT_FOUND = 6, ERR_DRIVER_NOT_LOADED = 9, ERR_UNKNOWN = 999 };

typedef struct {
  char name[64];
  unsigned int util, temp;
  unsigned long long total_mib, used_mib;
  unsigned int domain, bus, device;
} gpu_t;

/* Reads GPU `index` (or only counts when index < 0); returns the count, or
 * -1 when the file cannot be read. */
static int read_gpus(int index, gpu_t *out) {
  const char *path = getenv("GENIE_TEST_NVML_FILE");
  FILE *f;
  char line[256];
  int n = 0;
  if (!path) return -1;
  f = fopen(path, "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) {
    gpu_t g;
    memset(&g, 0, sizeof g);
    char pci[64] = "";
    if (sscanf(line, "%63s %u %u %llu %llu %63s", g.name, &g.util, &g.temp, &g.total_mib, &g.used_mib, pci) < 5)
      continue;
    g.bus = (unsigned int)n + 1;
    if (pci[0]) sscanf(pci, "%x:%x:%x", &g.domain, &g.bus, &g.device);
    if (n == index && out) *out = g;
    ++n;
  }
  fclose(f);
  return n;
}

EXPORT int nvmlInit_v2(void) { return getenv("GENIE_TEST_NVML_FILE") ? OK : ERR_DRIVER_NOT_LOADED; }
EXPORT int nvmlShutdown(void) { return OK; }
EXPORT const char *nvmlErrorString(int rc) {
  switch (rc) {
    case OK: return "Success";
    case ERR_INVALID_ARGUMENT: return "Invalid Argument";
    case ERR_NOT_FOUND: return "Not Found";
    case ERR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}
EXPORT int nvmlDeviceGetCount_v2(unsigned int *count) {
  int n = read_gpus(-1, NULL);
  if (!count) return ERR_INVALID_ARGUMENT;
  if (n < 0) return ERR_UNKNOWN;
  *count = (unsigned int)n;
  return OK;
}
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device) {
  int n = read_gpus(-1, NULL);
  if (!device) return ERR_INVALID_ARGUMENT;
  if (n < 0) return ERR_UNKNOWN;
  if ((int)index >= n) return ERR_NOT_FOUND;
  *device = (void *)(size_t)(index + 1);
  return OK;
}
static int lookup(void *device, gpu_t *g) {
  int index = (int)(size_t)device - 1;
  if (index < 0) return ERR_INVALID_ARGUMENT;
  return read_gpus(index, g) > index ? OK : ERR_NOT_FOUND;
}
EXPORT int nvmlDeviceGetName(void *device, char *name, unsigned int length) {
  gpu_t g;
  int rc = lookup(device, &g);
  if (rc != OK) return rc;
  if (!name || length == 0) return ERR_INVALID_ARGUMENT;
  snprintf(name, length, "%s", g.name);
  return OK;
}
EXPORT int nvmlDeviceGetMemoryInfo(void *device, nvmlMemory_t *m) {
  gpu_t g;
  int rc = lookup(device, &g);
  if (rc != OK) return rc;
  m->total = g.total_mib << 20;
  m->used = g.used_mib << 20;
  m->free = m->total > m->used ? m->total - m->used : 0;
  return OK;
}
EXPORT int nvmlDeviceGetUtilizationRates(void *device, nvmlUtilization_t *u) {
  gpu_t g;
  int rc = lookup(device, &g);
  if (rc != OK) return rc;
  u->gpu = g.util;
  u->memory = g.util;
  return OK;
}
EXPORT int nvmlDeviceGetTemperature(void *device, int sensor, unsigned int *temp) {
  gpu_t g;
  int rc = lookup(device, &g);
  if (rc != OK) return rc;
  if (sensor != 0 || !temp) return ERR_INVALID_ARGUMENT;
  *temp = g.temp;
  return OK;
}

typedef struct {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
} nvmlPciInfo_t;
EXPORT int nvmlDeviceGetPciInfo_v3(void *device, nvmlPciInfo_t *p) {
  gpu_t g;
  int rc = lookup(device, &g);
  if (rc != OK) return rc;
  if (!p) return ERR_INVALID_ARGUMENT;
  memset(p, 0, sizeof *p);
  p->domain = g.domain;
  p->bus = g.bus;
  p->device = g.device;
  snprintf(p->bus_id, sizeof p->bus_id, "%08x:%02x:%02x.0", g.domain, g.bus, g.device);
  snprintf(p->bus_id_legacy, sizeof p->bus_id_legacy, "%04x:%02x:%02x.0", g.domain, g.bus, g.device);
  return OK;
}
