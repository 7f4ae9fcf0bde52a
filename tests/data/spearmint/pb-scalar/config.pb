# JasperSnoek/spearmint's config.pb layout: a size-1 FLOAT used as a scalar, and an ENUM.
language: PYTHON
name: "bowl"

variable {
 name: "x"
 type: FLOAT
 size: 1
 min:  -2
 max:  2
}

variable {
 name: "shape"
 type: ENUM
 size: 1
 options: "round"
 options: "flat"
}
