module tb;
  reg clk = 0, rst = 1;
  reg [3:0] a = 0, b = 0;
  wire [3:0] q, y;
  wire [1:0] kind;
  branches dut (.clk(clk), .rst(rst), .a(a), .b(b), .q(q), .y(y), .kind(kind));
  always #5 clk = ~clk;
  integer i;
  initial begin
    #12 rst = 0;
    for (i = 0; i < 12; i = i + 1) begin
      a = i[3:0]; b = 4'd13 - i[3:0];
      @(negedge clk);
    end
    $finish;
  end
endmodule
