`timescale 1ns / 1ps
// A complete testbench for cvdp_copilot_binary_to_BCD_0030 (binary_to_bcd): every 8-bit input,
// checked against a reference; the listed values and edges first, then a random order.
module tb_binary_to_bcd;
  logic [7:0] binary_in;
  logic [11:0] bcd_out;
  integer errors = 0;
  integer k;

  binary_to_bcd uut (
      .binary_in(binary_in),
      .bcd_out(bcd_out)
  );

  function automatic [11:0] reference(input [7:0] value);
    reference = {4'(value / 100), 4'((value / 10) % 10), 4'(value % 10)};
  endfunction

  task automatic apply(input [7:0] value);
    binary_in = value;
    #1;
    if (bcd_out !== reference(value)) begin
      $display("FAIL: binary_in=%0d bcd_out=%h expected=%h", value, bcd_out, reference(value));
      errors = errors + 1;
    end
    if (bcd_out[3:0] > 9 || bcd_out[7:4] > 9 || bcd_out[11:8] > 9) begin
      $display("FAIL: binary_in=%0d digit out of range: %h", value, bcd_out);
      errors = errors + 1;
    end
  endtask

  initial begin
    // the prompt's fixed values and edges
    apply(8'd0);
    apply(8'd1);
    apply(8'd9);
    apply(8'd10);
    apply(8'd15);
    apply(8'd45);
    apply(8'd99);
    apply(8'd100);
    apply(8'd123);
    apply(8'd199);
    apply(8'd200);
    apply(8'd255);
    // powers of two
    for (k = 0; k < 8; k = k + 1) apply(8'(1 << k));
    // every value, up and then down (every input bit rises and falls)
    for (k = 0; k < 256; k = k + 1) apply(k[7:0]);
    for (k = 255; k >= 0; k = k - 1) apply(k[7:0]);
    // random values
    for (k = 0; k < 64; k = k + 1) apply($urandom_range(0, 255));
    apply(8'd0);
    if (errors == 0) $display("PASS: all conversions correct");
    else $display("FAIL: %0d errors", errors);
    $finish;
  end
endmodule
