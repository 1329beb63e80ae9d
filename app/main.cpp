#include "app/commands.h"

int main(int argc, char** argv) { return loft::app::run_cli(argc, argv); }
