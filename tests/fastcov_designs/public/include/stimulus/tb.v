module tb;
  reg [1:0] op;
  reg [7:0] a, b;
  wire [7:0] y;
  wire zero;
  alu dut (.op(op), .a(a), .b(b), .y(y), .zero(zero));
  initial begin
    op = 2; a = 0; b = 0;  // y and zero as they start: no time-0 glitch on zero
    #1 op = 0; a = 8'd3; b = 8'd3;
    #1 op = 1;
    #1 op = 2; a = 8'hF0; b = 8'h0F;
    #1 $display("y=%h zero=%b", y, zero);
    $finish;
  end
endmodule
