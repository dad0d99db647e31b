#include <gtest/gtest.h>

#include "common/result.h"

namespace memcoord {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  MEMCOORD_ASSIGN_OR_RETURN(int h, Half(x));
  MEMCOORD_ASSIGN_OR_RETURN(int q, Half(h));
  *out = q;
  return Status::Ok();
}

TEST(Status, CodesAndText) {
  EXPECT_TRUE(Status().ok());
  Status s = NotFound("rank 7 is unknown");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "NOT_FOUND: rank 7 is unknown");
  EXPECT_EQ(s.WithContext("trim: ").message(), "trim: rank 7 is unknown");
  EXPECT_EQ(s.WithContext("trim: ").code(), StatusCode::kNotFound);
}

TEST(Result, PropagatesErrors) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

}  // namespace
}  // namespace memcoord
