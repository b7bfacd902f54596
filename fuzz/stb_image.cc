// stb_image and stb_image_resize compiled from their headers (Debian's libstb-dev, the
// source of the libstb.so the library links), so that the fuzz targets' decoders are
// instrumented like the rest of the parsers' code.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_RESIZE_IMPLEMENTATION
#include <stb_image.h>
#include <stb_image_resize.h>
