// Test configuration shared by the FIFO's testbenches.
`define CFG_DATA_W 4
`define CFG_DEPTH 4
