// dtrain-read-tensorboard FILE...: prints every event of TensorBoard event files, one per line,
// after checking their framing and CRCs (tests/support/tensorboard_reader.h):
//   file_version brain.Event:2
//   scalar STEP TAG VALUE
//   text STEP TAG PLUGIN FIRST-LINE
// For the command-line tests of --tensorboard_dir. Exit 1 with the error for a damaged file.
#include <cstdio>
#include <exception>
#include <string>

#include "tests/support/tensorboard_reader.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dtrain-read-tensorboard FILE...\n");
    return 2;
  }
  try {
    for (int i = 1; i < argc; ++i) {
      for (const auto& event : dtrain::test::read_tensorboard_events(argv[i])) {
        if (!event.file_version().empty()) std::printf("file_version %s\n", event.file_version().c_str());
        for (const auto& value : event.summary().value()) {
          if (value.has_tensor()) {
            const std::string text = value.tensor().string_val_size() > 0 ? value.tensor().string_val(0) : "";
            std::printf("text %lld %s %s %s\n", static_cast<long long>(event.step()), value.tag().c_str(),
                        value.metadata().plugin_data().plugin_name().c_str(), text.substr(0, text.find('\n')).c_str());
          } else {
            std::printf("scalar %lld %s %.9g\n", static_cast<long long>(event.step()), value.tag().c_str(),
                        static_cast<double>(value.simple_value()));
          }
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain-read-tensorboard: %s\n", e.what());
    return 1;
  }
  return 0;
}
