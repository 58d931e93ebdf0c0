// The settings table (src/core/config_settings.def) drives the environment
// parsing and the validation: for every integer setting with a variable, its
// bounds are accepted and one past each is refused naming the variable, and
// Config::validate refuses a field set past its bounds naming the field.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "core/config.hpp"
#include "core/error.hpp"

namespace genie {
namespace {

template <class T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <class T>
int64_t to_int(const T& v, const char* name) {
  if constexpr (kIsInt<T>) {
    return v;
  } else {
    ADD_FAILURE() << "setting " << name << " is not an integer";
    return 0;
  }
}

template <class T>
void from_int(T& field, int64_t v) {
  if constexpr (kIsInt<T>) field = static_cast<T>(v);
}

int64_t read_int(const Config& c, Setting s) {
  switch (s) {
#define GENIE_SETTING(field, ...) \
  case Setting::field:            \
    return to_int(c.field, #field);
#include "core/config_settings.def"
#undef GENIE_SETTING
    default: return 0;
  }
}

void write_int(Config& c, Setting s, int64_t v) {
  switch (s) {
#define GENIE_SETTING(field, ...) \
  case Setting::field:            \
    from_int(c.field, v);         \
    break;
#include "core/config_settings.def"
#undef GENIE_SETTING
    default: break;
  }
}

genie_status_t apply(Config& c, std::string* detail) {
  try {
    c.apply_env();
    return GENIE_OK;
  } catch (const Error& e) {
    *detail = e.detail();
    return e.code();
  }
}

genie_status_t validate(const Config& c, std::string* detail) {
  try {
    c.validate();
    return GENIE_OK;
  } catch (const Error& e) {
    *detail = e.detail();
    return e.code();
  }
}

TEST(CoreConfigSettings, EveryIntegerSettingsBoundsFromTheEnvironment) {
  int checked = 0;
  for (size_t i = 0; i < static_cast<size_t>(Setting::count); ++i) {
    const Setting s = static_cast<Setting>(i);
    const SettingInfo& info = setting(s);
    if (info.kind != SettingKind::Int || info.env == nullptr) continue;
    ++checked;
    for (int64_t ok : {info.lo, info.hi == INT64_MAX ? info.lo + 1000 : info.hi}) {
      ::setenv(info.env, std::to_string(ok).c_str(), 1);
      Config c;
      std::string detail;
      EXPECT_EQ(apply(c, &detail), GENIE_OK) << info.env << "=" << ok << ": " << detail;
      EXPECT_EQ(read_int(c, s), ok) << info.env;
    }
    for (int64_t bad : {info.lo - 1, info.hi == INT64_MAX ? info.lo - 1 : info.hi + 1}) {
      ::setenv(info.env, std::to_string(bad).c_str(), 1);
      Config c;
      std::string detail;
      EXPECT_EQ(apply(c, &detail), GENIE_ERR_INVALID_ARGUMENT) << info.env << "=" << bad;
      EXPECT_NE(detail.find(info.env), std::string::npos) << detail;
    }
    ::setenv(info.env, "12abc", 1);
    Config c;
    std::string detail;
    EXPECT_EQ(apply(c, &detail), GENIE_ERR_INVALID_ARGUMENT) << info.env << "=12abc";
    ::unsetenv(info.env);
  }
  EXPECT_GE(checked, 20);  // 23 today: the table is read, not skipped
}

TEST(CoreConfigSettings, ValidateRefusesEveryIntegerFieldPastItsBounds) {
  for (size_t i = 0; i < static_cast<size_t>(Setting::count); ++i) {
    const Setting s = static_cast<Setting>(i);
    const SettingInfo& info = setting(s);
    if (info.kind != SettingKind::Int) continue;
    Config c;
    std::string detail;
    ASSERT_EQ(validate(c, &detail), GENIE_OK) << "the defaults: " << detail;
    write_int(c, s, info.lo - 1);
    EXPECT_EQ(validate(c, &detail), GENIE_ERR_INVALID_ARGUMENT) << info.name << " = " << info.lo - 1;
    EXPECT_NE(detail.find(setting_label(s)), std::string::npos) << detail;
  }
}

TEST(CoreConfigSettings, TheTableNamesEveryFieldOnceWithHelp) {
  for (size_t i = 0; i < static_cast<size_t>(Setting::count); ++i) {
    const SettingInfo& a = settings()[i];
    EXPECT_NE(std::string(a.help), "") << a.name;
    for (size_t j = i + 1; j < static_cast<size_t>(Setting::count); ++j) {
      const SettingInfo& b = settings()[j];
      EXPECT_STRNE(a.name, b.name);
      if (a.env && b.env) EXPECT_STRNE(a.env, b.env) << a.name << " and " << b.name;
    }
  }
}

}  // namespace
}  // namespace genie
