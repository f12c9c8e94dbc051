// Arithmetic (arithmetic.cpp): + - * / with numpy broadcasting (the backward reduces to each
// input's shape with sum_to), their scalar forms and operators, neg, pow, casts, comparisons.
#pragma once

#include "engine/tensor.h"

namespace ag {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);  // a / b elementwise (10.0 / t)
Tensor neg(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor clone(const Tensor& x);
Tensor to(const Tensor& x, DType dtype);   // differentiable between f32 and f64
Tensor sign(const Tensor& x);              // not differentiable
Tensor gt(const Tensor& x, double value);  // b8, not differentiable
Tensor lt(const Tensor& x, double value);  // b8, not differentiable

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);

}  // namespace ag
