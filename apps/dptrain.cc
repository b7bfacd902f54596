// dptrain: data-parallel training of convolutional networks from the command line (see cli.h).
#include "cli.h"

int main(int argc, char** argv) { return dpt::cli::run(argc, argv); }
