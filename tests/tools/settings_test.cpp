// The settings tables (tasks/common/settings.h) as the program uses them: tasks/README.md's resume
// table is the one generated from them (regenerate it from the failure's text when a row changes).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tools/commands.h"

namespace {

TEST(Settings, ReadmeResumeTableIsTheTablesOne) {
  std::ifstream file(std::string(ATTOGRAD_SOURCE_DIR) + "/tasks/README.md");
  std::stringstream readme;
  readme << file.rdbuf();
  const std::string table = ag::cli::resume_table(ag::tasks::TableFormat::markdown);
  EXPECT_NE(readme.str().find(table), std::string::npos)
      << "tasks/README.md's resume table is stale; the tables give:\n"
      << table;
}

}  // namespace
