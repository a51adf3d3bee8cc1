`ifndef ALU_DEFS_VH
`define ALU_DEFS_VH
`define ALU_ADD 2'b00
`define ALU_SUB 2'b01
`define ALU_AND 2'b10
`define ALU_OR  2'b11
`define ALU_W   8
`endif
